// The map section: which candidates (candidates.h) stand for the frame's points, one adaptive
// bit per candidate in candidate order, in parts that decode at once (docs/delta-format.md, "Map
// section").
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "candidates.h"
#include "dejaview/base/status.h"
#include "dejaview/codec/range_coder.h"

namespace dv::codec {

// What the encoder's classification found out about each candidate, each an OR over the frame's
// points (hot_paths.h HotPaths::ClassifyPoints): nearest, the nearest candidate within the
// tolerance of some point (the first among equals), which that point's explanation rests on;
// close, within select_factor of the tolerance of some point. The encoder selects no other
// candidate, so each selected one has an original point within the tolerance. Per frame point:
// point_nearest, the candidate it marks as nearest, and point_second, the nearest of the other
// candidates within the tolerance (-1 for none, or when not given at all): a nearest may go when
// each of its points keeps its second (EncodeSelection). The points each candidate is the nearest
// of, listed by candidate (ListByNearest): candidate c's are nearest_points [nearest_start[c],
// nearest_start[c + 1]), in point order, and nearest_seconds[k] is point_second of
// nearest_points[k]; the selection coder and the fill index read them (empty: not listed).
struct CandidateMarks {
  std::vector<uint8_t> nearest, close;
  std::vector<int32_t> point_nearest, point_second;
  std::vector<int32_t> nearest_start, nearest_points, nearest_seconds;
};
// Lists the points by nearest candidate (a counting sort of point_nearest) for `candidates`
// candidates into *start and *points, and with point_second, their seconds in the same order into
// *seconds.
void ListByNearest(const std::vector<int32_t>& point_nearest, size_t candidates,
                   std::vector<int32_t>* start, std::vector<int32_t>* points,
                   const std::vector<int32_t>* point_second = nullptr,
                   std::vector<int32_t>* seconds = nullptr);

// Where the selection bits' models start and end (docs/delta-format.md, "Map section"): start,
// where the map carries priors, kSelectionModels model states the selection starts from, else
// every model starts at one half; end (training only): receives the states after the last bit.
// start and end may be the same array.
constexpr size_t kSelectionModels = 64 * 108;
struct SelectionModel {
  const BitModel* start = nullptr;
  BitModel* end = nullptr;
};
// The encoder chooses each bit as it codes it (the decoder reads bits, whatever chose them): 1 for
// a nearest; 1 for a close candidate unless its adaptive model favours 0 strongly enough
// (kDropOdds in map_section.cpp); 0 for any other. A nearest whose model strongly favours 0
// (kCoverOdds) is left out when every point it is the nearest of has a second candidate that is
// selected or still to come; those are then selected whatever their models say. Every point
// explained by the marks keeps a selected candidate within the tolerance. *selected receives the
// bits.
// Two selected candidates that are neighbours: `later` and its neighbour `earlier` at causal
// offset `offset` (kCausalOffset), which comes before it in the order. The coder lists them as it
// codes, for the fill section (fill.h): later in candidate order, then offset order. Pairs across
// a tile border where the neighbour comes later in the order are not listed.
struct SelectedPair {
  // Left uninitialised: the coder writes a pair into every slot before it counts it, and growing
  // its list by resize() would zero each new slot first.
  SelectedPair() {}
  SelectedPair(uint32_t later_, uint32_t earlier_, uint8_t offset_)
      : later(later_), earlier(earlier_), offset(offset_) {}
  uint32_t later, earlier;
  uint8_t offset;
};
// The selection bits in `parts` streams (version 9; one before): part p holds the candidates
// [n p / parts, n (p + 1) / parts) in their order, its models start at model.start, and its
// neighbour contexts see only its own candidates (a causal neighbour in an earlier part is "not
// coded"), so that distinct parts can be coded, or decoded, at once on distinct threads. The
// encoder leaves a nearest out only where the seconds it rests on are in its part. model.end
// receives the last part's states. Selected pairs are listed per part, not across parts.
constexpr int kMaxSelectionParts = 16;
class SelectionCoder {
 public:
  // parts is clamped to [1, kMaxSelectionParts]; *selected receives the bits (it is sized here).
  SelectionCoder(const Candidates& c, const SelectionModel& model, int parts,
                 std::vector<uint8_t>* selected, bool list_pairs);
  ~SelectionCoder();
  SelectionCoder(const SelectionCoder&) = delete;
  SelectionCoder& operator=(const SelectionCoder&) = delete;
  // The encoder: SetMarks once (marks must outlive the coder), then EncodePart for each part.
  // Marks without their lists by nearest are listed here.
  void SetMarks(const CandidateMarks& marks);
  std::vector<uint8_t> EncodePart(int part);
  Status DecodePart(int part, const uint8_t* data, size_t size);
  // The selected pairs of every part, in part order, once every part is coded.
  void TakePairs(std::vector<SelectedPair>* pairs);

 private:
  std::pair<size_t, size_t> Range(int part) const;
  template <typename Code>
  void CodePart(int part, Code&& code);

  const Candidates& c_;
  const SelectionModel model_;
  const int parts_;
  const cpu::Kernels& cpu_;  // the ring states' variants, chosen when the coder is made
  std::vector<uint8_t>& selected_;
  // Version 5's ranges (RingStates) and selected_ shifted by one (for listing pairs), each n + 1
  // long, each part's range filled by the part.
  std::unique_ptr<float[]> h_;
  std::unique_ptr<uint8_t[]> shifted_;
  std::vector<std::vector<SelectedPair>> pairs_;
  // The encoder's: the seconds of the frame points each candidate is the nearest of (start_,
  // seconds_: the marks' lists, or own_start_ and own_seconds_, which ListByNearest makes with
  // own_points_ beside them), and the candidates that must be selected because a nearest before
  // them was left out.
  const CandidateMarks* marks_ = nullptr;
  std::vector<int32_t> own_start_, own_points_, own_seconds_;
  const int32_t* start_ = nullptr;
  const int32_t* seconds_ = nullptr;
  std::vector<uint8_t> needed_;
};
// One part, on the calling thread (the format before version 9).
std::vector<uint8_t> EncodeSelection(const Candidates& c, const CandidateMarks& marks,
                                     const SelectionModel& model, std::vector<uint8_t>* selected,
                                     std::vector<SelectedPair>* pairs = nullptr);
Status DecodeSelection(const Candidates& c, const uint8_t* data, size_t size,
                       const SelectionModel& model, std::vector<uint8_t>* selected,
                       std::vector<SelectedPair>* pairs = nullptr);

}  // namespace dv::codec
