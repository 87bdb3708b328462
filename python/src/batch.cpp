// dejaview.read_batch: a packed export batch (docs/export-format.md) as numpy views on its
// 16-byte-aligned point arrays, without copying the points.
#include <pybind11/stl.h>

#include "binding.h"
#include "dejaview/base/file_util.h"
#include "dejaview/server/batch_format.h"

namespace dv::py {
namespace {

// The file's bytes, which every array of the batch views. glibc's malloc returns 16-byte aligned
// blocks on every 64-bit target, so the format's 16-byte file offsets are 16-byte addresses.
struct BatchFile {
  std::vector<uint8_t> bytes;
  std::vector<server::BatchFrameView> frames;
};

struct BatchFrame {
  std::shared_ptr<const BatchFile> file;
  size_t index = 0;
  const server::BatchFrameView& view() const { return file->frames[index]; }
  const float* xyzi() const {
    return reinterpret_cast<const float*>(file->bytes.data() + view().points_offset);
  }
};

std::vector<BatchFrame> ReadBatch(const pyb::object& path_arg) {
  const std::string path = PathArg(path_arg);
  auto file = std::make_shared<BatchFile>();
  {
    pyb::gil_scoped_release release;
    file->bytes = ValueOrThrow(ReadFileBytes(path));
    auto frames = server::ParseBatch(file->bytes.data(), file->bytes.size());
    if (!frames.ok()) throw StatusError(frames.status().WithContext(path));
    file->frames = std::move(frames).value();
  }
  std::vector<BatchFrame> out;
  for (size_t i = 0; i < file->frames.size(); ++i) out.push_back(BatchFrame{file, i});
  return out;
}

pyb::array_t<float> Column(const BatchFrame& f, pyb::ssize_t first, pyb::ssize_t count) {
  const pyb::ssize_t n = f.view().points;
  const float* data = f.view().points ? f.xyzi() + first : nullptr;
  if (count == 1) return ArrayView<float>(f.file, data, {n}, {4});
  return ArrayView<float>(f.file, data, {n, count}, {4, 1});
}

}  // namespace

void RegisterBatch(pyb::module_& m) {
  pyb::class_<BatchFrame>(m, "BatchFrame",
                          "A frame of a packed export batch; its arrays view the file's bytes.")
      .def_property_readonly(
          "xyzi", [](const BatchFrame& f) { return Column(f, 0, 4); },
          "N x 4 float32 (x, y, z, intensity), 16-byte aligned rows")
      .def_property_readonly(
          "points", [](const BatchFrame& f) { return Column(f, 0, 3); }, "N x 3 float32 (a view)")
      .def_property_readonly(
          "intensity", [](const BatchFrame& f) { return Column(f, 3, 1); }, "N float32 (a view)")
      .def_property_readonly("vehicle", [](const BatchFrame& f) { return f.view().vehicle; })
      .def_property_readonly("drive", [](const BatchFrame& f) { return f.view().drive; })
      .def_property_readonly("map_version",
                             [](const BatchFrame& f) { return f.view().map_version; })
      .def_property_readonly("sensor_id", [](const BatchFrame& f) { return f.view().sensor_id; })
      .def_property_readonly("sequence", [](const BatchFrame& f) { return f.view().sequence; })
      .def_property_readonly("timestamp_ns",
                             [](const BatchFrame& f) { return f.view().timestamp_ns; })
      .def_property_readonly("T_map_sensor",
                             [](const BatchFrame& f) { return PoseArray(f.view().T_map_sensor); })
      .def("__len__", [](const BatchFrame& f) { return f.view().points; });
  m.def("read_batch", &ReadBatch, pyb::arg("path"),
        "The frames of a packed export batch file (.dvxb), every CRC checked.");
}

}  // namespace dv::py
