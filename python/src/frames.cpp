// dejaview.Frame (a decoded frame as numpy views) and dejaview.Decoder (delta files and payloads
// decoded against one map, as `dejaview decode` does).
#include <pybind11/stl.h>

#include <mutex>

#include "binding.h"
#include "dejaview/base/file_util.h"
#include "dejaview/maps/route_map.h"

namespace dv::py {

pyb::array_t<double> PoseArray(const Pose& pose) {
  pyb::array_t<double> a({4, 4});
  auto m = a.mutable_unchecked<2>();
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) m(r, c) = pose.matrix()(r, c);
  }
  return a;
}

namespace {

// Eigen::Vector3f is three packed floats (no padding: it is not a vectorisable fixed size), so
// the vector of them is an N x 3 float32 array.
static_assert(sizeof(Eigen::Vector3f) == 3 * sizeof(float), "Vector3f must be packed");

using FramePtr = std::shared_ptr<Frame>;

pyb::array_t<float> Points(const FramePtr& f) {
  const auto& xyz = f->decoded.cloud.xyz;
  return ArrayView<float>(f, xyz.empty() ? nullptr : xyz.front().data(),
                          {pyb::ssize_t(xyz.size()), 3}, {3, 1});
}

pyb::array_t<float> Intensity(const FramePtr& f) {
  const auto& in = f->decoded.cloud.intensity;
  return ArrayView<float>(f, in.data(), {pyb::ssize_t(in.size())}, {1});
}

// One map (or none: intra frames only) and its decoder; a codec::Decoder serves one thread at a
// time, so calls from several Python threads (the GIL is released while decoding) take turns.
class Decoder {
 public:
  Decoder(const std::string& map_dir, size_t map_budget_bytes) {
    KeepDecodingMemory();
    if (!map_dir.empty()) map_ = ValueOrThrow(maps::OpenMap(map_dir, map_budget_bytes));
    decoder_ = std::make_unique<codec::Decoder>(map_.get());
  }
  FramePtr Decode(const uint8_t* data, size_t size, int threads) {
    auto frame = std::make_shared<Frame>();
    std::lock_guard<std::mutex> lock(mu_);
    frame->decoded = ValueOrThrow(decoder_->Decode(data, size, threads));
    return frame;
  }
  std::string map_version() const { return map_ ? map_->version() : ""; }

 private:
  std::unique_ptr<maps::RouteMap> map_;
  std::unique_ptr<codec::Decoder> decoder_;
  std::mutex mu_;
};

void CheckThreads(int threads) {
  if (threads < 1 || threads > codec::kMaxEncoderThreads) {
    throw StatusError(Status::InvalidArgument("decode: threads must be 1.." +
                                              std::to_string(codec::kMaxEncoderThreads)));
  }
}

}  // namespace

void RegisterFrames(pyb::module_& m) {
  pyb::class_<Frame, FramePtr>(m, "Frame",
                               "A decoded frame. points and intensity are numpy views of the "
                               "decoded buffers (no copy), valid for as long as they live.")
      .def_property_readonly("points", &Points, "N x 3 float32, sensor frame, metres")
      .def_property_readonly("intensity", &Intensity, "N float32")
      .def_property_readonly(
          "T_map_sensor", [](const FramePtr& f) { return PoseArray(f->decoded.T_map_sensor); },
          "4 x 4 float64: sensor coordinates -> map coordinates (the refined pose in the payload)")
      .def_property_readonly("sequence", [](const FramePtr& f) { return f->decoded.info.sequence; })
      .def_property_readonly("timestamp_ns",
                             [](const FramePtr& f) { return f->decoded.info.timestamp_ns; })
      .def_property_readonly("sensor_id",
                             [](const FramePtr& f) { return f->decoded.info.sensor_id; })
      .def_property_readonly("map_version",
                             [](const FramePtr& f) { return f->decoded.map_version; })
      .def_property_readonly("intra", [](const FramePtr& f) { return f->decoded.intra; })
      .def_property_readonly("tolerance_m",
                             [](const FramePtr& f) { return f->decoded.tolerance_m; })
      .def_property_readonly(
          "record",
          [](const FramePtr& f) -> pyb::object {
            return f->record ? pyb::cast(*f->record) : pyb::none();
          },
          "the index row (dejaview.FrameRecord) of a frame read from a store, else None")
      .def("__len__", [](const FramePtr& f) { return f->decoded.cloud.size(); })
      .def("__repr__", [](const FramePtr& f) {
        return "<dejaview.Frame sequence=" + std::to_string(f->decoded.info.sequence) +
               " points=" + std::to_string(f->decoded.cloud.size()) + ">";
      });

  pyb::class_<Decoder>(m, "Decoder",
                       "Decodes delta frames coded against one route map (None: intra only).")
      .def(pyb::init([](const pyb::object& map_dir, size_t map_budget_mb) {
             return std::make_unique<Decoder>(OptionalPathArg(map_dir), map_budget_mb << 20);
           }),
           pyb::arg("map") = pyb::none(), pyb::arg("map_budget_mb") = 0)
      .def_property_readonly("map_version", &Decoder::map_version)
      .def(
          "decode",
          [](Decoder& d, pyb::buffer data, int threads) {
            CheckThreads(threads);
            const pyb::buffer_info info = data.request();
            if (info.ndim != 1 || info.itemsize != 1 || info.strides[0] != 1) {
              throw StatusError(Status::InvalidArgument("decode: expected contiguous bytes"));
            }
            pyb::gil_scoped_release release;
            return d.Decode(static_cast<const uint8_t*>(info.ptr), size_t(info.size), threads);
          },
          pyb::arg("payload"), pyb::arg("threads") = 1, "Decodes one delta payload (bytes).")
      .def(
          "decode_file",
          [](Decoder& d, const pyb::object& path_arg, int threads) {
            CheckThreads(threads);
            const std::string path = PathArg(path_arg);
            pyb::gil_scoped_release release;
            const std::vector<uint8_t> bytes = ValueOrThrow(ReadFileBytes(path));
            try {
              return d.Decode(bytes.data(), bytes.size(), threads);
            } catch (const StatusError& e) {
              throw StatusError(e.status().WithContext(path));
            }
          },
          pyb::arg("path"), pyb::arg("threads") = 1, "Decodes one .dvd file.");
}

}  // namespace dv::py
