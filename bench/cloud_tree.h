// nanoflann over a cloud's points (bench-private): a k-d tree on their first Dims coordinates,
// x y z (3) or x y (2), searching with squared Euclidean distances.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <nanoflann.hpp>
#include <vector>

namespace dv::bench {

// nanoflann's dataset interface over points the caller keeps alive while the tree is used.
struct CloudAdaptor {
  const std::vector<Eigen::Vector3f>& pts;
  size_t kdtree_get_point_count() const { return pts.size(); }
  float kdtree_get_pt(size_t i, size_t d) const { return pts[i][int(d)]; }
  template <class BBox>
  bool kdtree_get_bbox(BBox&) const {
    return false;
  }
};

template <int Dims>
using CloudTree =
    nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<float, CloudAdaptor>,
                                        CloudAdaptor, Dims>;

}  // namespace dv::bench
