// dejaview_ingest_bench: the server's acknowledged path, measured end to end (DEALER -> ROUTER
// over TCP loopback -> parse -> dedup look-up -> store Put with fsync -> frame index commit ->
// ACK) with the remote tier's lazy copy off and on, side by side in one run:
//   1. ack latency of DATA batches, one in flight, in rotating blocks (same machine load);
//   2. throughput with a window of batches in flight, as the agent uploads.
// Three servers run in this process, one per mode, each on its own store and SQLite index; the
// "on" ones copy to a real s3rver started here. Prints markdown tables. Usage:
//   dejaview_ingest_bench [--blocks N] [--batches N] [--records N] [--kib K] [--window W]
//                         [--dir DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "dejaview/base/file_util.h"
#include "dejaview/base/percentile.h"
#include "dejaview/codec/codec.h"
#include "dejaview/server/ingest.h"
#include "dejaview/server/testing/running_server.h"
#include "dejaview/store/testing/s3rver_process.h"

namespace dv::server {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int blocks = 6;    // latency blocks per mode
  int batches = 40;  // batches per latency block
  int records = 8;   // records per batch
  size_t kib = 44;   // about a KITTI frame's delta at T = 0.1 m
  int window = 4;    // the agent's default upload.window
  int throughput_batches = 200;
  std::string dir = (std::filesystem::temp_directory_path() / "dejaview-ingest-bench").string();
};

// Intra frames of random points, each about `kib` KiB coded: the server checks every record's
// container before it acknowledges it, so records carry real frames. Made before anything is
// timed; records differ in their metadata, so every object stored is a new one.
std::vector<std::vector<uint8_t>> RandomFrames(size_t kib, int count) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-60, 60), i01(0, 1);
  std::vector<std::vector<uint8_t>> frames;
  size_t points = kib << 8;  // a first guess, then scaled to the size the first frame came to
  for (int k = -1; k < count; ++k) {
    PointCloud cloud;
    for (size_t i = 0; i < points; ++i) cloud.push_back({u(rng), u(rng), u(rng) / 10}, i01(rng));
    auto bytes = codec::Encoder(nullptr).Encode(cloud, Pose::Identity(), {}, {});
    if (!bytes.ok()) {
      std::fprintf(stderr, "ingest_bench: %s\n", bytes.status().ToString().c_str());
      std::exit(1);
    }
    if (k < 0) {
      points = size_t(double(points) * double(kib << 10) / double(bytes->size()));
    } else {
      frames.push_back(std::move(bytes).value());
    }
  }
  return frames;
}

// One vehicle's upload connection: HELLO, then DATA batches of fresh records.
class Client {
 public:
  Client(zmq::context_t* ctx, const std::string& endpoint, const Args& args,
         const std::vector<std::vector<uint8_t>>* frames)
      : socket_(*ctx, zmq::socket_type::dealer), args_(args), frames_(frames) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 30'000);
    socket_.connect(endpoint);
    transport::Message hello;
    hello.type = transport::MessageType::kHello;
    hello.vehicle = "bench";
    hello.sensor_ids = {0};
    Send(hello);
    ok_ = Receive().type == transport::MessageType::kAck;
  }
  bool ok() const { return ok_; }
  void SendBatch() {
    transport::Message m;
    m.type = transport::MessageType::kData;
    m.batch_id = ++batch_;
    for (int i = 0; i < args_.records; ++i) {
      transport::SpoolRecord r;
      r.id = ++sequence_;
      r.meta.vehicle = "bench";
      r.meta.drive = "d";
      r.meta.sequence = sequence_;
      r.meta.timestamp_ns = int64_t(sequence_) * 100'000'000;
      r.payload = (*frames_)[sequence_ % frames_->size()];
      m.records.push_back(std::move(r));
    }
    Send(m);
  }
  // The next ACK; a NACK or a timeout is fatal to the benchmark.
  bool ReceiveAck() {
    const transport::Message m = Receive();
    if (m.type != transport::MessageType::kAck || m.stored != uint32_t(args_.records)) {
      std::fprintf(stderr, "ingest_bench: batch not stored: %s\n", m.detail.c_str());
      return false;
    }
    return true;
  }

 private:
  void Send(const transport::Message& m) {
    const auto bytes = transport::EncodeMessage(m);
    socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
  }
  transport::Message Receive() {
    zmq::message_t reply;
    if (!socket_.recv(reply, zmq::recv_flags::none)) return {};
    auto d = transport::DecodeMessage(static_cast<const uint8_t*>(reply.data()), reply.size());
    return d.ok() ? std::move(d).value() : transport::Message{};
  }
  zmq::socket_t socket_;
  const Args& args_;
  const std::vector<std::vector<uint8_t>>* frames_;
  uint64_t batch_ = 0, sequence_ = 0;
  bool ok_ = false;
};

// idle_ms < 0: no remote tier; otherwise the remote tier with copier.idle_ms = idle_ms.
Status WriteStoreYaml(const std::string& path, const std::string& disk_dir,
                      const store::S3rverProcess& s3, int idle_ms) {
  std::string y = "memory:\n  budget_bytes: 0\ndisk:\n  dir: " + disk_dir + "\n";
  if (idle_ms >= 0) {
    y += "remote:\n  endpoint: " + s3.config().endpoint + "\n  bucket: " + s3.config().bucket +
         "\n  region: us-east-1\n  prefix: " + std::to_string(idle_ms) +
         "/\ncopier:\n  idle_ms: " + std::to_string(idle_ms) + "\n";
  }
  return WriteFileAtomic(path, y);
}

int Main(const Args& args) {
  std::error_code ec;
  std::filesystem::remove_all(args.dir, ec);
  if (!MakeDirs(args.dir).ok()) return 1;
  auto s3 = store::S3rverProcess::Start(args.dir + "/s3", "bench");
  if (!s3.ok()) {
    std::fprintf(stderr, "%s\n", s3.status().ToString().c_str());
    return 1;
  }
  // Three servers: no remote tier, the lazy copy as soon as objects arrive, and the lazy copy
  // gated on a 100 ms pause in puts (copier.idle_ms).
  constexpr int kModes = 3;
  const int idle[kModes] = {-1, 0, 100};
  const char* names[kModes] = {"off", "on (lazy, copy at once)", "on (lazy, idle_ms 100)"};
  zmq::context_t ctx(1);  // before the clients: their sockets close before it terminates
  std::vector<std::unique_ptr<RunningServer>> servers;
  const std::vector<std::vector<uint8_t>> frames = RandomFrames(args.kib, 16);
  std::vector<std::unique_ptr<Client>> clients;
  for (int m = 0; m < kModes; ++m) {
    const std::string d = args.dir + "/mode" + std::to_string(m);
    const Status st = WriteStoreYaml(d + ".yaml", d, **s3, idle[m]);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    ServerOptions o;
    o.store_config = d + ".yaml";
    servers.push_back(std::make_unique<RunningServer>(d, o));
    if (servers.back()->endpoint().empty()) {
      std::fprintf(stderr, "ingest_bench: the server on %s did not start\n", d.c_str());
      return 1;
    }
    clients.push_back(std::make_unique<Client>(&ctx, servers.back()->endpoint(), args, &frames));
    if (!clients.back()->ok()) return 1;
  }

  // 1. Latency: one batch in flight; the order of the modes alternates per block, and a pause
  // after each block lets the copier drain what the "on" block queued before "off" is timed.
  std::vector<double> ms[kModes];
  for (int b = 0; b < args.blocks; ++b) {
    for (int k = 0; k < kModes; ++k) {
      const int m = (b + k) % kModes;
      for (int i = 0; i < args.batches; ++i) {
        const auto t0 = Clock::now();
        clients[m]->SendBatch();
        if (!clients[m]->ReceiveAck()) return 1;
        ms[m].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    }
  }
  // 2. Throughput: a window of batches in flight, each mode once, in order.
  double seconds[kModes];
  for (int m = 0; m < kModes; ++m) {
    const auto t0 = Clock::now();
    int sent = 0, acked = 0;
    while (acked < args.throughput_batches) {
      while (sent < args.throughput_batches && sent - acked < args.window) {
        clients[m]->SendBatch();
        ++sent;
      }
      if (!clients[m]->ReceiveAck()) return 1;
      ++acked;
    }
    seconds[m] = std::chrono::duration<double>(Clock::now() - t0).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  const double batch_mb = double(args.records) * double(args.kib << 10) / 1e6;
  std::printf("### Ingest through dejaview-server: batches of %d records x %zu KiB\n\n",
              args.records, args.kib);
  std::printf(
      "| remote copy | ack p50 ms | ack p99 ms | batches timed | throughput, window %d: "
      "records/s | MB/s |\n|---|---|---|---|---|---|\n",
      args.window);
  for (int m = 0; m < kModes; ++m) {
    std::printf("| %s | %.2f | %.2f | %zu | %.0f | %.1f |\n", names[m], NearestRank(ms[m], 0.5),
                NearestRank(ms[m], 0.99), ms[m].size(),
                double(args.throughput_batches * args.records) / seconds[m],
                double(args.throughput_batches) * batch_mb / seconds[m]);
  }
  std::printf("\n");
  for (int m = 1; m < kModes; ++m) {
    std::printf("%s vs off: p50 %+.1f%%, p99 %+.1f%%, throughput %+.1f%%\n", names[m],
                100.0 * (NearestRank(ms[m], 0.5) / NearestRank(ms[0], 0.5) - 1),
                100.0 * (NearestRank(ms[m], 0.99) / NearestRank(ms[0], 0.99) - 1),
                100.0 * (seconds[0] / seconds[m] - 1));
  }
  return 0;
}

}  // namespace
}  // namespace dv::server

int main(int argc, char** argv) {
  dv::server::Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--blocks")
      a.blocks = std::atoi(v.c_str());
    else if (k == "--batches")
      a.batches = std::atoi(v.c_str());
    else if (k == "--records")
      a.records = std::atoi(v.c_str());
    else if (k == "--kib")
      a.kib = size_t(std::atol(v.c_str()));
    else if (k == "--window")
      a.window = std::atoi(v.c_str());
    else if (k == "--throughput-batches")
      a.throughput_batches = std::atoi(v.c_str());
    else if (k == "--dir")
      a.dir = v;
    else {
      std::fprintf(stderr, "ingest_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.blocks < 1 || a.batches < 1 || a.records < 1 || a.records > 256 || a.kib < 1 ||
      a.window < 1 || a.throughput_batches < 1) {
    std::fprintf(stderr, "ingest_bench: every count must be positive (records <= 256)\n");
    return 2;
  }
  return dv::server::Main(a);
}
