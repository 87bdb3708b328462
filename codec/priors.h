// The models of a frame's range-coded streams, and the states they start from: the map's codec
// priors (maps::RouteMap::codec_priors, docs/map-format.md), learnt by TrainPriors.
#pragma once

#include <cstdint>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/codec/range_coder.h"
#include "dejaview/maps/route_map.h"
#include "map_section.h"
#include "octree_coder.h"

namespace dv::codec {

// The starting states of a delta frame's range-coded streams, by the section that holds each
// stream: empty, the models start at one half.
struct ModelStates {
  std::vector<BitModel> selection, residual, gap, surface;
};

// Every stream's states at one half, sized: what priors training starts from.
ModelStates FreshModelStates();
std::vector<uint8_t> WritePriors(const ModelStates& states);
// The map's priors; none (every vector empty) when the map carries none.
Status ReadPriors(const maps::RouteMap& map, ModelStates* out);

// The models starting from a stream's priors (ModelStates), or at one half where it has none.
SelectionModel SelectionModelFrom(const std::vector<BitModel>& priors);
OctreeModel OctreeModelFrom(const std::vector<BitModel>& start = {});

}  // namespace dv::codec
