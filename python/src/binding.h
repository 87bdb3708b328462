// What the binding's files share: the Status -> Python exception translation and decoded frames
// handed to numpy without a copy.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "dejaview/base/status.h"
#include "dejaview/codec/codec.h"
#include "dejaview/store/frame_index.h"

namespace dv::py {

namespace pyb = pybind11;

// A failed Status on its way to Python: the module's translator raises the exception class of its
// code (dejaview.FormatError, StoreError, ...) with the C++ message.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(Status s) : std::runtime_error(s.ToString()), status_(std::move(s)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}
template <typename T>
T ValueOrThrow(StatusOr<T> s) {
  if (!s.ok()) throw StatusError(s.status());
  return std::move(s).value();
}

// A path argument: str or any os.PathLike (pathlib.Path), as os.fspath takes it.
std::string PathArg(const pyb::handle& path);
// None -> "".
std::string OptionalPathArg(const pyb::object& path);

// Creates the exception classes and registers the translator.
void RegisterErrors(pyb::module_& m);

// A decoded frame; numpy arrays view its buffers and keep it alive (a capsule holding a
// shared_ptr), so a frame outlives the reader that made it for as long as an array of it lives.
struct Frame {
  codec::DecodedFrame decoded;
  std::optional<store::FrameRecord> record;  // the index row, for frames read from a store
};

// A numpy array over memory that `owner` keeps alive; shape and strides in elements of T.
template <typename T>
pyb::array_t<T> ArrayView(std::shared_ptr<const void> owner, const T* data,
                          std::vector<pyb::ssize_t> shape, std::vector<pyb::ssize_t> strides) {
  for (auto& s : strides) s *= pyb::ssize_t(sizeof(T));
  auto* keep = new std::shared_ptr<const void>(std::move(owner));
  pyb::capsule capsule(keep, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
  return pyb::array_t<T>(std::move(shape), std::move(strides), data, capsule);
}

// A 4x4 float64 copy of a pose (small; a copy keeps it independent of the frame).
pyb::array_t<double> PoseArray(const Pose& pose);

// Called by whatever will decode (a Decoder, a Store): makes the process's allocator keep a
// frame's working memory for the next frame instead of returning it to the kernel (module.cpp).
void KeepDecodingMemory();

void RegisterFrames(pyb::module_& m);
void RegisterStore(pyb::module_& m);
void RegisterBatch(pyb::module_& m);

}  // namespace dv::py
