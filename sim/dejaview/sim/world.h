// A procedural street world along a route: a ground height field and analytic primitives, in a
// 2D grid for ray casting.
//
// The route (a polyline of straight segments) is fixed by the world seed; each day places the
// variable objects (parked cars, construction, vegetation size, permanent changes, traffic)
// from (seed, day), so day N is reproducible on its own. Labels: docs/simulator.md.
#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <vector>

#include "dejaview/base/kitti.h"
#include "dejaview/base/pose.h"

namespace dv::sim {

enum class Material : uint8_t {
  kAsphalt,
  kMarking,
  kConcrete,
  kFacade,
  kMetal,
  kSign,
  kBark,
  kLeaves,
  kCarPaint,
  kSkin,
  kBarrier,
};
// Diffuse reflectivity in 0..1; retro-reflective materials ignore the incidence angle.
float Reflectivity(Material m);
bool RetroReflective(Material m);

enum LabelClass : uint16_t { kStatic = 0, kDynamic = 1, kChanged = 2 };
static_assert(kDynamic == kSimulatorDynamicClass, "base/kitti.h reads simulated labels");

struct Primitive {
  enum class Kind : uint8_t { kBox, kCylinder, kEllipsoid };
  Kind kind = Kind::kBox;
  Eigen::Vector3d center = Eigen::Vector3d::Zero();
  Eigen::Vector3d half = Eigen::Vector3d::Ones();  // box half extents / ellipsoid radii /
                                                   // cylinder (radius, radius, half height)
  double yaw = 0;                                  // boxes only, about +z
  Material material = Material::kConcrete;
  LabelClass label = kStatic;
  uint16_t object_id = 0;

  // Ray p + t d (d unit); the nearest t in (t_min, t_max) and the outward normal, or false.
  bool Intersect(const Eigen::Vector3d& p, const Eigen::Vector3d& d, double t_min, double t_max,
                 double* t, Eigen::Vector3d* normal) const;
  // True when q lies inside the primitive grown by margin_m (labels-match-geometry checks).
  bool Contains(const Eigen::Vector3d& q, double margin_m) const;
  // Half-size of the xy footprint's bounding square, for grid insertion.
  double Radius() const;
};

struct Hit {
  double range_m = 0;
  Eigen::Vector3d normal = Eigen::Vector3d::UnitZ();
  Material material = Material::kAsphalt;
  LabelClass label = kStatic;
  uint16_t object_id = 0;
};

struct DayRates {
  double parked_occupancy = 0.6;  // P(a parking slot holds a car on a given day)
  double construction = 0.05;     // P(a construction site is active on a given day)
  double leaf_loss = 0.1;         // P(a tree is leafless on a given day)
  double growth_per_day = 0.004;  // relative crown growth per day
  int permanent_per_km = 2;       // new buildings/signs, each appearing on a random day 1..10
  double vehicles_per_km = 10;    // moving traffic, both directions
  double cyclists_per_km = 3;
  double pedestrians_per_km = 20;
};

class Route {
 public:
  Route(uint64_t seed, double length_m);
  double length() const { return cum_.back(); }
  Eigen::Vector2d PointAt(double s) const;
  double HeadingAt(double s) const;  // smoothed over a few metres so that corners are driveable
  double DistanceTo(const Eigen::Vector2d& q) const;
  size_t segments() const { return pts_.size() - 1; }
  // Distance from q to segment i, and the arc length of the nearest point on it.
  double SegmentDistance(size_t i, const Eigen::Vector2d& q, double* s) const;

 private:
  std::vector<Eigen::Vector2d> pts_;
  std::vector<Eigen::Vector2d> dir_;  // unit direction of each segment
  std::vector<double> cum_;           // arc length at each vertex
};

class World {
 public:
  World(uint64_t seed, int day, double route_length_m, const DayRates& rates);

  const Route& route() const { return route_; }
  // Moving objects at time t (seconds into the day's drive).
  std::vector<Primitive> DynamicAt(double t_s) const;
  // The nearest hit of ray origin + t dir within max_range_m, among the static world, the ground
  // and the given dynamic primitives. visited is scratch of static_size() entries (mailboxing).
  bool Cast(const Eigen::Vector3d& origin, const Eigen::Vector3d& dir, double max_range_m,
            const std::vector<Primitive>& dynamic, std::vector<uint32_t>* visited, uint32_t stamp,
            Hit* hit) const;
  size_t static_size() const { return statics_.size(); }
  const std::vector<Primitive>& statics() const { return statics_; }

  // The ground is the surface z = GroundHeight(x, y), the same on every day of a seed: a road
  // with a camber, 15 cm curbs, sidewalks sloping up from them, a verge beyond, long-wavelength
  // undulation, small-scale roughness, raised patches and potholes (docs/simulator.md).
  double GroundHeight(double x, double y) const;
  // The ground without roughness, patches and potholes: where objects and wheels stand.
  double BaseHeight(double x, double y) const;
  Eigen::Vector3d GroundNormal(double x, double y) const;
  Material GroundMaterial(double x, double y) const;

  static constexpr double kRoadHalfWidth = 8.5;  // two lanes each way and a parking strip
  static constexpr double kSidewalkWidth = 4.0;
  static constexpr double kCamber = 0.02;  // road crown to gutter slope
  static constexpr double kCurbHeight = 0.15;
  static constexpr double kCurbFace = 0.03;  // the curb face as a steep ramp this wide
  static constexpr double kSidewalkSlope = 0.015;

 private:
  struct Mover {
    double s0, speed, lateral;  // arc length at t = 0, m/s (sign = direction), offset from axis
    int kind;                   // 0 vehicle, 1 cyclist, 2 pedestrian
    uint16_t id;
  };
  struct Wave {  // one plane wave of the undulation: amp * sin(kx x + ky y + phase)
    double kx, ky, amp, phase;
  };
  struct Disc {  // a raised patch (dz > 0, flat top) or a pothole (dz < 0, a smooth bowl)
    double x, y, r, dz;
  };
  // The road surface under an object standing on it; objects are sunk into it a little so that
  // no gap opens under them where the ground falls away.
  void AddStatic(Primitive p);
  void BuildGroundGrid();
  void BuildGrid();
  int CellOf(double x, double y) const;  // -1 outside the grid
  // Lateral distance from the route axis and arc length of the nearest axis point.
  double Lateral(double x, double y, int cell, double* s) const;
  double Profile(double lateral) const;  // the cross-section: camber, curb, sidewalk, verge
  double Undulation(double x, double y) const;
  double Roughness(double x, double y, double lateral) const;
  double Discs(double x, double y, int cell) const;
  double Height(double x, double y, int cell, bool detail) const;
  // The first crossing of the ray with the ground for t in [t0, t1], given that the ground lies
  // within [lo, hi] there.
  bool GroundSpan(const Eigen::Vector3d& origin, const Eigen::Vector3d& dir, double t0, double t1,
                  double lo, double hi, double* t) const;

  uint64_t noise_seed_;  // the roughness lattices', mixed once from the seed
  Route route_;
  std::vector<Primitive> statics_;
  std::vector<Mover> movers_;
  std::vector<Wave> waves_;
  double wave_slope_ = 0;      // bound on the undulation's gradient
  double wave_curvature_ = 0;  // bound on its second derivative
  std::vector<Disc> discs_;
  double cell_m_ = 4.0;
  Eigen::Vector2d grid_min_;
  int nx_ = 0, ny_ = 0;
  std::vector<uint32_t> cell_start_;  // CSR: primitives of cell c are cell_items_[start[c]..]
  std::vector<uint32_t> cell_items_;
  // Per cell: the route segments that can be nearest to a point in it (up to 4, -1 unused), the
  // discs that reach into it (CSR) and bounds on the ground height in it.
  std::vector<std::array<int16_t, 4>> cell_segments_;
  std::vector<uint32_t> disc_start_, disc_items_;
  std::vector<float> ground_lo_, ground_hi_;
};

}  // namespace dv::sim
