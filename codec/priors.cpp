// The codec priors' serialisation (docs/map-format.md, "Codec priors").
#include "priors.h"

#include <cstring>
#include <string>

#include "container.h"
#include "dejaview/base/bytes.h"

namespace dv::codec {
namespace {

// "DVCP" | u8 version 1 | u8 streams = 4 | per stream: u8 section id, u32 count, count x (u16 p,
// u8 uses), little-endian; the streams of sections map, residual, gap, surface, in that order.
constexpr char kPriorsMagic[4] = {'D', 'V', 'C', 'P'};
constexpr uint8_t kPriorsVersion = 1;
struct PriorStream {
  uint8_t section;
  size_t count;
  std::vector<BitModel> ModelStates::*states;
};
constexpr uint8_t kPriorStreams = 4;
const PriorStream kPriorStream[kPriorStreams] = {
    {kMapSelection, kSelectionModels, &ModelStates::selection},
    {kResidualGeometry, kOctreeModels, &ModelStates::residual},
    {kGapGeometry, kOctreeModels, &ModelStates::gap},
    {kSurfaceGeometry, kOctreeModels, &ModelStates::surface}};

}  // namespace

std::vector<uint8_t> WritePriors(const ModelStates& states) {
  ByteWriter w;
  w.Bytes(reinterpret_cast<const uint8_t*>(kPriorsMagic), 4);
  w.U8(kPriorsVersion);
  w.U8(kPriorStreams);
  for (const PriorStream& stream : kPriorStream) {
    const std::vector<BitModel>& models = states.*stream.states;
    w.U8(stream.section);
    w.U32(uint32_t(models.size()));
    for (const BitModel& m : models) {
      w.U16(m.p);
      w.U8(m.uses);
    }
  }
  return w.Take();
}

Status ReadPriors(const maps::RouteMap& map, ModelStates* out) {
  *out = ModelStates();
  const std::vector<uint8_t>& b = map.codec_priors();
  if (b.empty()) return Status::Ok();
  auto bad = [&](const std::string& what) {
    *out = ModelStates();
    return Status::Corruption("map " + map.version() + ": codec priors: " + what);
  };
  ByteReader r(b.data(), b.size());
  uint8_t magic[4] = {0, 0, 0, 0}, version = 0, streams = 0;
  if (!r.Bytes(magic, 4) || std::memcmp(magic, kPriorsMagic, 4) != 0) return bad("bad magic");
  if (!r.U8(&version) || version != kPriorsVersion) return bad("unsupported version");
  if (!r.U8(&streams) || streams != kPriorStreams) return bad("expected 4 streams");
  for (const PriorStream& stream : kPriorStream) {
    const std::string name = SectionName(stream.section);
    uint8_t section = 0;
    uint32_t count = 0;
    if (!r.U8(&section) || section != stream.section || !r.U32(&count) || count != stream.count ||
        r.remaining() < 3 * size_t(count)) {
      return bad("expected " + std::to_string(stream.count) + " " + name + " models");
    }
    std::vector<BitModel>& models = out->*stream.states;
    models.resize(count);
    for (BitModel& m : models) {
      // The range coder keeps p in [1, 65535] and uses in [0, 32].
      if (!r.U16(&m.p) || !r.U8(&m.uses) || m.p == 0 || m.uses > 32) {
        return bad("a " + name + " model state out of range");
      }
    }
  }
  if (r.remaining() != 0) return bad("trailing bytes");
  return Status::Ok();
}

ModelStates FreshModelStates() {
  ModelStates models;
  for (const PriorStream& stream : kPriorStream) (models.*stream.states).resize(stream.count);
  return models;
}

SelectionModel SelectionModelFrom(const std::vector<BitModel>& priors) {
  SelectionModel m;
  if (!priors.empty()) m.start = priors.data();
  return m;
}

OctreeModel OctreeModelFrom(const std::vector<BitModel>& start) {
  OctreeModel m;
  if (!start.empty()) m.start = start.data();
  return m;
}

}  // namespace dv::codec
