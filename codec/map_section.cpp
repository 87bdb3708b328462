// Map section body: one adaptive binary decision per candidate voxel, in canonical map order.
// Context = (static context of the candidate) x (state of its already-coded neighbours).
#include "map_section.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "cpu/kernels.h"
#include "dejaview/codec/range_coder.h"
#include "hot_paths.h"

namespace dv::codec {
namespace {

// The neighbour context's states: 3 x 3 x 4 x 3.
constexpr int kNeighbourStates = 108;

// The neighbour context. A scan ring crosses the map at a nearly constant range from the
// sensor, so the coded neighbour nearest the candidate in horizontal range (of the
// representatives in the sensor frame, float) is the one most likely on the same ring: the state
// (not coded, unselected, selected) of that one among the 13, of the nearest among the four at the
// same height, how many of the 13 are selected (0..3+), and the state of the neighbour below (on
// dense maps, walls and poles). The state itself is the CPU variants' (cpu/kernels.h ring_state).
class RingStates {
 public:
  // h[0] is the range of "no neighbour" (index -1): infinitely far, never selected (the
  // caller's). Each part fills h[begin + 1, end + 1) of the storage the parts share, and reads
  // and marks only there. The sum in double and the square root exactly rounded: the same on
  // every machine.
  RingStates(const cpu::Kernels& k, const Candidates& c, size_t begin, size_t end, float* h)
      : k_(k), h_(h) {
    k.horizontal_ranges(c.sensor.data() + begin, end - begin, h + 1 + begin);
  }
  // The state of candidate i, all candidates before it marked; nb as ring_state's.
  int Get(const int32_t nb[cpu::kPaddedOffsets], size_t i) const {
    return k_.ring_state(h_ + 1, nb, i);
  }
  float Range(size_t i) const { return h_[i + 1]; }
  // Candidate i's bit, once coded: the sign of its range.
  void Mark(size_t i, int bit) {
    if (bit) h_[i + 1] = -h_[i + 1];
  }

 private:
  const cpu::Kernels& k_;
  float* h_;  // h_[i + 1]: candidate i's horizontal range; sign bit: selected
};

class SelectionContexts {
 public:
  static_assert(kStaticContexts * kNeighbourStates == kSelectionModels, "map_section.h");
  void Load(const BitModel* start) { std::copy(start, start + kSelectionModels, m_); }
  void Store(BitModel* end) const { std::copy(m_, m_ + kSelectionModels, end); }
  BitModel* Get(uint8_t static_ctx, int neighbour) {
    return &m_[static_ctx * kNeighbourStates + neighbour];
  }

 private:
  BitModel m_[kStaticContexts * kNeighbourStates];
};

}  // namespace

namespace {

// A close free bit (a candidate within select_factor x T of a point that is no point's nearest)
// is left out when its model gives 0 a probability above 0.6, in units of 2^-16: a predicted bit
// costs less than half a bit, an unpredicted one more than one. The other free bits (within T of
// a point, not close) stay 0: where a surface is sampled sparsely, the fill points buy the distance
// for fewer bits than selecting them would.
constexpr uint32_t kDropOdds = 3 * 65536 / 5;  // P(0) above which a close, free bit is 0
// P(0) above which a nearest goes when its points keep their seconds: only a strongly predicted
// 0 is worth the seconds it forces into the selection.
constexpr uint32_t kCoverOdds = 17 * 65536 / 20;

// The coder's room for pairs: kPairsPerCandidate a candidate of a part, and in the first part
// for the whole frame's, which TakePairs appends to it. On KITTI a frame lists fewer than one a
// candidate at T = 0.05 and under three at 0.8: the lists seldom regrow.
constexpr size_t kPairsPerCandidate = 3;

// One part's selected pairs (SelectedPair), listed as its candidates are coded. Every slot is
// written before it counts, and the count moves on by each neighbour's bit, read from a copy of
// the bits shifted by one so that "no neighbour" (-1) reads a 0: a test and push_back per
// neighbour was a branch on data, mispredicted.
class PairList {
 public:
  // shifted[begin + 1, end + 1) is cleared here; the slots are not (only the pages written are
  // touched).
  PairList(std::vector<SelectedPair>* pairs, uint8_t* shifted, size_t begin, size_t end,
           size_t room)
      : pairs_(*pairs), shifted_(shifted) {
    std::fill(&shifted_[begin + 1], &shifted_[end + 1], uint8_t(0));
    if (pairs_.size() < room + kCausalOffsets) pairs_.resize(room + kCausalOffsets);
  }
  // Selected candidate i and each selected one of its causal neighbours nb (-1: none).
  void All(size_t i, const int32_t nb[kCausalOffsets]) {
    SelectedPair* p = Room(i);
    for (int o = 0; o < kCausalOffsets; ++o) {
      *p = {uint32_t(i), uint32_t(nb[o]), uint8_t(o)};
      const int in = shifted_[size_t(nb[o] + 1)];
      p += in;
      listed_ += size_t(in);
    }
  }
  // Selected candidate i at the planes' cell `at`, whose selected neighbours are the bits of
  // `selected` (cpu::RingLane's lanes): only those, not all 13 written and the rest dropped.
  void Selected(size_t i, const CausalNeighbours& around, size_t at, unsigned selected) {
    Room(i);
    for (unsigned m = selected; m != 0; m &= m - 1) {
      const int o = cpu::RingOffset(__builtin_ctz(m));
      pairs_[listed_++] = {uint32_t(i), uint32_t(around.Neighbour(at, o)), uint8_t(o)};
    }
  }
  void Finish() { pairs_.resize(listed_); }

 private:
  // Candidate i is selected; room for its pairs.
  SelectedPair* Room(size_t i) {
    shifted_[i + 1] = 1;
    if (listed_ + kCausalOffsets > pairs_.size()) pairs_.resize(2 * pairs_.size());
    return pairs_.data() + listed_;
  }

  std::vector<SelectedPair>& pairs_;
  uint8_t* shifted_;
  size_t listed_ = 0;
};

// The bits of candidates [begin, end): code(model, i) codes candidate i's bit (or decodes
// it) and returns it. Away from the tile's borders the neighbours' ranges come from the planes,
// and their indices only for a selected candidate's pairs; elsewhere both by look-up. h: the
// coder's ranges (RingStates), which it fills for the part first.
template <typename Code>
void CodeRingPart(const cpu::Kernels& k, const Candidates& c, size_t begin, size_t end, float* h,
                  SelectionContexts* ctx, PairList* pairs, Code&& code) {
  RingStates ring(k, c, begin, end, h);
  CausalNeighbours around(c, begin, h + 1);
  int32_t nb[cpu::kPaddedOffsets] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                     -1, -1, -1, -1, -1, -1, -1, -1};
  for (size_t i = begin; i < end; ++i) {
    const ptrdiff_t at = around.Locate(i, nb);
    unsigned neighbours_selected = 0;
    const int state =
        at >= 0 ? k.ring_state_planes(around.PrevRanges(size_t(at)), around.CurRanges(size_t(at)),
                                      ring.Range(i), &neighbours_selected)
                : ring.Get(nb, i);
    const int bit = code(ctx->Get(c.context[i], state), i);
    ring.Mark(i, bit);
    around.Mark(bit);
    if (bit && pairs) {
      if (at >= 0) {
        pairs->Selected(i, around, size_t(at), neighbours_selected);
      } else {
        pairs->All(i, nb);
      }
    }
  }
}

}  // namespace

SelectionCoder::SelectionCoder(const Candidates& c, const SelectionModel& model, int parts,
                               std::vector<uint8_t>* selected, bool list_pairs)
    : c_(c),
      model_(model),
      parts_(std::clamp(parts, 1, kMaxSelectionParts)),
      cpu_(cpu::Best()),
      selected_(*selected),
      pairs_(size_t(parts_)) {
  const size_t n = c.voxels.size();
  selected_.assign(n, 0);
  // Left for each part to fill its own range: on one thread these were 6 bytes a candidate
  // cleared before any part could start.
  h_.reset(new float[n + 1]);
  h_[0] = HUGE_VALF;
  if (list_pairs) {
    shifted_.reset(new uint8_t[n + 1]);
    shifted_[0] = 0;
  }
}

SelectionCoder::~SelectionCoder() = default;

std::pair<size_t, size_t> SelectionCoder::Range(int part) const {
  const size_t n = c_.voxels.size();
  return {n * size_t(part) / size_t(parts_), n * size_t(part + 1) / size_t(parts_)};
}

// The selection bits of one part in candidate order, each with its context: code(model, i) codes
// candidate i's bit (or decodes it into `selected_`) and returns it. With pairs, lists the
// selected neighbour pairs (SelectedPair) as it goes.
template <typename Code>
void SelectionCoder::CodePart(int part, Code&& code) {
  const auto [begin, end] = Range(part);
  auto ctx = std::make_unique<SelectionContexts>();
  if (model_.start) ctx->Load(model_.start);
  std::optional<PairList> pairs;
  if (shifted_) {
    const size_t room = kPairsPerCandidate * (part == 0 ? c_.voxels.size() : end - begin);
    pairs.emplace(&pairs_[size_t(part)], shifted_.get(), begin, end, room);
  }
  PairList* list = pairs ? &*pairs : nullptr;
  CodeRingPart(cpu_, c_, begin, end, h_.get(), ctx.get(), list, code);
  if (list) list->Finish();
  if (model_.end && part == parts_ - 1) ctx->Store(model_.end);
}

void ListByNearest(const std::vector<int32_t>& point_nearest, size_t candidates,
                   std::vector<int32_t>* start, std::vector<int32_t>* points,
                   const std::vector<int32_t>* point_second, std::vector<int32_t>* seconds) {
  start->assign(candidates + 1, 0);
  for (int32_t b : point_nearest) {
    if (b >= 0) ++(*start)[size_t(b) + 1];
  }
  for (size_t k = 1; k <= candidates; ++k) (*start)[k] += (*start)[k - 1];
  points->resize(size_t((*start)[candidates]));
  std::vector<int32_t> at(start->begin(), start->end() - 1);
  // The seconds written where their points go, read in point order: the selection coder reads
  // them by candidate, and reading point_second through the lists there was a miss a point.
  if (point_second) seconds->resize(points->size());
  for (size_t p = 0; p < point_nearest.size(); ++p) {
    const int32_t b = point_nearest[p];
    if (b < 0) continue;
    const size_t k = size_t(at[size_t(b)]++);
    (*points)[k] = int32_t(p);
    if (point_second) (*seconds)[k] = (*point_second)[p];
  }
}

void SelectionCoder::SetMarks(const CandidateMarks& marks) {
  marks_ = &marks;
  const size_t n = c_.voxels.size();
  // Marks without each point's second (a caller's own) leave every nearest in: no lists.
  const bool seconds = marks.point_second.size() == marks.point_nearest.size();
  const bool listed = seconds && marks.nearest_start.size() == n + 1 &&
                      marks.nearest_seconds.size() == marks.nearest_points.size();
  if (!seconds) {
    own_start_.assign(n + 1, 0);
  } else if (!listed) {
    ListByNearest(marks.point_nearest, n, &own_start_, &own_points_, &marks.point_second,
                  &own_seconds_);
  }
  start_ = listed ? marks.nearest_start.data() : own_start_.data();
  seconds_ = listed ? marks.nearest_seconds.data() : own_seconds_.data();
  needed_.assign(n, 0);
}

std::vector<uint8_t> SelectionCoder::EncodePart(int part) {
  const CandidateMarks& marks = *marks_;
  const auto [begin, end] = Range(part);
  RangeEncoder rc;
  std::vector<uint8_t>& selected = selected_;
  // Whether each point candidate i is the nearest of has a second that is selected (coded before
  // i) or still to come, in this part: another part's bits are not this one's to read or set.
  auto covered = [&, begin = begin, end = end](size_t i) {
    for (int32_t k = start_[i]; k < start_[i + 1]; ++k) {
      const int32_t s = seconds_[size_t(k)];
      if (s < int32_t(begin) || size_t(s) >= end || (size_t(s) < i && !selected[size_t(s)])) {
        return false;
      }
    }
    return start_[i] < start_[i + 1];
  };
  CodePart(part, [&](BitModel* m, size_t i) {
    int bit = marks.nearest[i] || marks.close[i];
    if (bit && !marks.nearest[i] && m->p > kDropOdds) bit = 0;
    if (needed_[i]) {
      bit = 1;
    } else if (marks.nearest[i] && m->p > kCoverOdds && covered(i)) {
      bit = 0;
      // The candidates that must be selected because a nearest before them was left out.
      for (int32_t k = start_[i]; k < start_[i + 1]; ++k) {
        const int32_t s = seconds_[size_t(k)];
        if (size_t(s) > i) needed_[size_t(s)] = 1;
      }
    }
    rc.Encode(m, bit);
    selected[i] = uint8_t(bit);
    return bit;
  });
  return rc.Finish();
}

Status SelectionCoder::DecodePart(int part, const uint8_t* data, size_t size) {
  RangeDecoder rc(data, size);
  std::vector<uint8_t>& selected = selected_;
  CodePart(part, [&](BitModel* m, size_t i) {
    const int bit = rc.Decode(m);
    selected[i] = uint8_t(bit);
    return bit;
  });
  if (rc.overrun() > 0) return Status::Corruption("map section truncated");
  return Status::Ok();
}

void SelectionCoder::TakePairs(std::vector<SelectedPair>* pairs) {
  // The first part's list grows into the whole: its spare capacity often holds the rest.
  size_t total = 0;
  for (const auto& p : pairs_) total += p.size();
  *pairs = std::move(pairs_[0]);
  pairs->reserve(total);
  for (size_t k = 1; k < pairs_.size(); ++k) {
    pairs->insert(pairs->end(), pairs_[k].begin(), pairs_[k].end());
  }
}

std::vector<uint8_t> EncodeSelection(const Candidates& c, const CandidateMarks& marks,
                                     const SelectionModel& model, std::vector<uint8_t>* selected,
                                     std::vector<SelectedPair>* pairs) {
  SelectionCoder coder(c, model, 1, selected, pairs != nullptr);
  coder.SetMarks(marks);
  std::vector<uint8_t> bits = coder.EncodePart(0);
  if (pairs) coder.TakePairs(pairs);
  return bits;
}

Status DecodeSelection(const Candidates& c, const uint8_t* data, size_t size,
                       const SelectionModel& model, std::vector<uint8_t>* selected,
                       std::vector<SelectedPair>* pairs) {
  SelectionCoder coder(c, model, 1, selected, pairs != nullptr);
  DV_RETURN_IF_ERROR(coder.DecodePart(0, data, size));
  if (pairs) coder.TakePairs(pairs);
  return Status::Ok();
}

}  // namespace dv::codec
