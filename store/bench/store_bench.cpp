// dejaview_store_bench: the store's two benchmark questions, side by side in one run, against a
// real s3rver on this machine (started here, like the tests):
//   1. ack latency of Put (durable on disk, fsync) with the lazy remote copy off and on;
//   2. read throughput of the same objects from the remote tier alone (cold: no memory tier),
//      from local disk alone, and multi-path from both at once.
// Prints a markdown table. Usage:
//   dejaview_store_bench [--puts N] [--put-kib K] [--reads N] [--read-mib M] [--dir DIR]
//                        [--chunk-kib K] [--verify] [--disk-read-mbps R]
// --disk-read-mbps has the kernel throttle this process's reads from the block device under DIR
// to R MB/s during the read phase (a cgroup v1 blkio group; root), to measure the reader against
// a local disk slower than this VM's, e.g. a SATA SSD's 500 MB/s. s3rver, a separate process,
// is not throttled: a remote object store does not share the local disk.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "dejaview/base/percentile.h"
#include "dejaview/store/store.h"
#include "dejaview/store/testing/s3rver_process.h"

namespace dv::store {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int puts = 400;
  size_t put_kib = 64;
  int reads = 32;
  size_t read_mib = 4;
  std::string dir = (std::filesystem::temp_directory_path() / "dejaview-store-bench").string();
  bool verify = false;
  uint64_t chunk_kib = 1024;
  double disk_read_mbps = 0;  // 0: no throttle
};

// Throttles this process's reads from the disk that holds dir while it lives: a cgroup v1 blkio
// group with blkio.throttle.read_bps_device (O_DIRECT reads are throttled by the block layer; on a
// cgroup v2 host run the bench under `systemd-run -p IOReadBandwidthMax=...` instead).
class DiskReadThrottle {
 public:
  static StatusOr<std::unique_ptr<DiskReadThrottle>> Start(const std::string& dir, double mbps) {
    const std::string root = "/sys/fs/cgroup/blkio";
    if (!std::filesystem::exists(root + "/cgroup.procs")) {
      return Status::Unavailable("--disk-read-mbps: no cgroup v1 blkio hierarchy at " + root);
    }
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return Status::IoError("--disk-read-mbps: stat " + dir);
    // The throttle applies to whole disks: a partition names its parent's device numbers.
    std::string dev = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
    const std::string sys = "/sys/dev/block/" + dev;
    if (std::filesystem::exists(sys + "/partition")) {
      std::ifstream parent(sys + "/../dev");
      if (!(parent >> dev)) return Status::IoError("--disk-read-mbps: no parent of " + sys);
    }
    auto t = std::unique_ptr<DiskReadThrottle>(
        new DiskReadThrottle(root, root + "/dejaview-store-bench-" + std::to_string(::getpid())));
    std::error_code ec;
    std::filesystem::create_directory(t->group_, ec);
    if (ec) return Status::IoError("--disk-read-mbps: mkdir " + t->group_ + ": " + ec.message());
    t->made_ = true;
    DV_RETURN_IF_ERROR(Write(t->group_ + "/blkio.throttle.read_bps_device",
                             dev + " " + std::to_string(uint64_t(mbps * 1e6))));
    DV_RETURN_IF_ERROR(Write(t->group_ + "/cgroup.procs", std::to_string(::getpid())));
    return t;
  }
  ~DiskReadThrottle() {
    if (!made_) return;
    (void)Write(root_ + "/cgroup.procs", std::to_string(::getpid()));
    std::error_code ec;
    std::filesystem::remove(group_, ec);
  }

 private:
  DiskReadThrottle(std::string root, std::string group)
      : root_(std::move(root)), group_(std::move(group)) {}
  static Status Write(const std::string& path, const std::string& value) {
    std::ofstream f(path);
    f << value << "\n";
    f.flush();
    if (!f) return Status::IoError("--disk-read-mbps: cannot write '" + value + "' to " + path);
    return Status::Ok();
  }
  const std::string root_, group_;
  bool made_ = false;
};

std::vector<uint8_t> RandomBytes(std::mt19937_64* rng, size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = (*rng)();
    std::copy(reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 8,
              b.begin() + long(i));
  }
  return b;
}

StoreConfig BaseConfig(const Args& args, const std::string& dir, const S3rverProcess* s3) {
  StoreConfig c;
  c.disk.dir = dir;
  c.memory.budget_bytes = 0;  // measure disk and remote, not the cache
  c.disk.direct_io = true;    // and the disk device, not the page cache
  c.read.chunk_bytes = args.chunk_kib << 10;
  if (s3) {
    static_cast<S3Config&>(c.remote) = s3->config();
  }
  return c;
}

struct AckResult {
  double p50_ms, p99_ms, mbps;
};

AckResult Summarize(const std::vector<double>& ms, double seconds, size_t object_bytes) {
  return {NearestRank(ms, 0.5), NearestRank(ms, 0.99),
          double(ms.size()) * double(object_bytes) / seconds / 1e6};
}

// Puts args.puts objects into a store without a remote tier and into one with the lazy copy,
// in alternating blocks of 50 (so both see the same machine load), timing each Put (= the
// acknowledgement). The copier runs during the "on" blocks; Flush between blocks keeps its
// backlog from spilling into the next "off" block.
Status MeasureAcks(const Args& args, const std::string& dir, const S3rverProcess* s3,
                   AckResult* off, AckResult* on) {
  DV_ASSIGN_OR_RETURN(auto store_off, Store::Open(BaseConfig(args, dir + "/ack-off", nullptr)));
  DV_ASSIGN_OR_RETURN(auto store_on, Store::Open(BaseConfig(args, dir + "/ack-on", s3)));
  std::mt19937_64 rng(1);
  const size_t object_bytes = args.put_kib << 10;
  std::vector<double> ms[2];
  double seconds[2] = {0, 0};
  constexpr int kBlock = 50;
  for (int done = 0; done < args.puts; done += kBlock) {
    for (int which = 0; which < 2; ++which) {
      Store* store = which == 0 ? store_off.get() : store_on.get();
      std::vector<std::vector<uint8_t>> objects;
      for (int i = done; i < std::min(args.puts, done + kBlock); ++i) {
        objects.push_back(RandomBytes(&rng, object_bytes));
      }
      const auto start = Clock::now();
      for (const auto& o : objects) {
        const auto t0 = Clock::now();
        DV_RETURN_IF_ERROR(store->Put(o.data(), o.size()).status());
        ms[which].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      seconds[which] += std::chrono::duration<double>(Clock::now() - start).count();
      DV_RETURN_IF_ERROR(store->Flush(600000));
    }
  }
  *off = Summarize(ms[0], seconds[0], object_bytes);
  *on = Summarize(ms[1], seconds[1], object_bytes);
  return Status::Ok();
}

int Run(const Args& args) {
  std::filesystem::remove_all(args.dir);
  auto s3 = S3rverProcess::Start(args.dir + "/s3", "bench");
  if (!s3.ok()) {
    std::fprintf(stderr, "%s\n", s3.status().ToString().c_str());
    return 1;
  }
  AckResult off, on;
  if (const Status st = MeasureAcks(args, args.dir, s3->get(), &off, &on); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("### Ack latency: %d puts of %zu KiB (fsync'd on local disk)\n\n", args.puts,
              args.put_kib);
  std::printf("| remote copy | p50 ms | p99 ms | MB/s | p50 vs off |\n|---|---|---|---|---|\n");
  std::printf("| off | %.3f | %.3f | %.1f | |\n", off.p50_ms, off.p99_ms, off.mbps);
  std::printf("| on (lazy) | %.3f | %.3f | %.1f | %+.1f%% |\n\n", on.p50_ms, on.p99_ms, on.mbps,
              100.0 * (on.p50_ms / off.p50_ms - 1));

  // Read: objects on disk and in the remote tier (after Flush), then three reads of all of them.
  auto store = Store::Open(BaseConfig(args, args.dir + "/read", s3->get()));
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  std::mt19937_64 rng(3);
  std::vector<ObjectId> ids;
  for (int i = 0; i < args.reads; ++i) {
    const auto b = RandomBytes(&rng, args.read_mib << 20);
    ids.push_back(*(*store)->Put(b.data(), b.size()));
  }
  if (const Status st = (*store)->Flush(600000); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  struct Mode {
    const char* name;
    bool disk, remote;
  };
  const Mode modes[] = {{"remote tier only (cold)", false, true},
                        {"local disk only", true, false},
                        {"multi-path disk + remote", true, true}};
  std::unique_ptr<DiskReadThrottle> throttle;
  if (args.disk_read_mbps > 0) {
    auto t = DiskReadThrottle::Start(args.dir, args.disk_read_mbps);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      return 1;
    }
    throttle = std::move(*t);
  }
  std::string throttled;
  if (throttle)
    throttled = ", disk reads throttled to " + std::to_string(int(args.disk_read_mbps)) + " MB/s";
  std::printf("### Read throughput: %d objects of %zu MiB, chunks of %zu KiB%s%s\n\n", args.reads,
              args.read_mib, size_t(args.chunk_kib), args.verify ? ", verified" : "",
              throttled.c_str());
  // Three rounds, modes interleaved so that each sees the same machine load; the median
  // round is reported. The tiers' bandwidth estimates carry over from round to round.
  constexpr int kRounds = 3;
  std::vector<double> mbps[3], disk_share[3];
  for (int round = 0; round < kRounds; ++round) {
    for (int mode = 0; mode < 3; ++mode) {
      const Mode& m = modes[mode];
      const StoreMetrics before = (*store)->Metrics();
      ReadOptions options;
      options.use_memory = false;
      options.use_disk = m.disk;
      options.use_remote = m.remote;
      options.verify = args.verify;
      options.prefetch_objects = 16;
      const auto t0 = Clock::now();
      auto reader = (*store)->Read(ids, options);
      uint64_t bytes = 0;
      while (!reader->Done()) {
        auto got = reader->Next();
        if (!got.ok()) {
          std::fprintf(stderr, "%s\n", got.status().ToString().c_str());
          return 1;
        }
        bytes += got->size();
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      const StoreMetrics after = (*store)->Metrics();
      mbps[mode].push_back(double(bytes) / s / 1e6);
      disk_share[mode].push_back(double(after.tiers[1].read_bytes - before.tiers[1].read_bytes) /
                                 double(bytes));
      std::fprintf(stderr, "round %d %s: %.0f MB/s; estimates disk %.0f remote %.0f MB/s\n", round,
                   m.name, mbps[mode].back(), after.tiers[1].read_bandwidth_mbps,
                   after.tiers[2].read_bandwidth_mbps);
    }
  }
  std::printf("| source | MB/s (median of %d) | min | max | disk share |\n|---|---|---|---|---|\n",
              kRounds);
  for (int mode = 0; mode < 3; ++mode) {
    std::printf("| %s | %.0f | %.0f | %.0f | %.0f%% |\n", modes[mode].name,
                NearestRank(mbps[mode], 0.5),
                *std::min_element(mbps[mode].begin(), mbps[mode].end()),
                *std::max_element(mbps[mode].begin(), mbps[mode].end()),
                100 * NearestRank(disk_share[mode], 0.5));
  }
  std::printf("\n");
  std::filesystem::remove_all(args.dir);
  return 0;
}

}  // namespace
}  // namespace dv::store

int main(int argc, char** argv) {
  dv::store::Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--puts" && has_value) {
      args.puts = std::atoi(argv[++i]);
    } else if (a == "--put-kib" && has_value) {
      args.put_kib = size_t(std::atol(argv[++i]));
    } else if (a == "--reads" && has_value) {
      args.reads = std::atoi(argv[++i]);
    } else if (a == "--read-mib" && has_value) {
      args.read_mib = size_t(std::atol(argv[++i]));
    } else if (a == "--dir" && has_value) {
      args.dir = argv[++i];
    } else if (a == "--chunk-kib" && has_value) {
      args.chunk_kib = uint64_t(std::atol(argv[++i]));
    } else if (a == "--disk-read-mbps" && has_value) {
      args.disk_read_mbps = std::atof(argv[++i]);
    } else if (a == "--verify") {
      args.verify = true;
    } else {
      std::fprintf(stderr, "dejaview_store_bench: unknown or incomplete argument '%s'\n",
                   a.c_str());
      return 2;
    }
  }
  if (args.puts < 1 || args.put_kib < 1 || args.reads < 1 || args.read_mib < 1 ||
      args.chunk_kib < 4 || !(args.disk_read_mbps >= 0)) {
    std::fprintf(stderr, "dejaview_store_bench: counts and sizes must be positive\n");
    return 2;
  }
  return dv::store::Run(args);
}
