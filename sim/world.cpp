#include "dejaview/sim/world.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "dejaview/sim/rng.h"

namespace dv::sim {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxHeight = 30.0;  // nothing in the world is taller; rays above it leave

// The ground (docs/simulator.md): three plane waves of 80-400 m, each up to this grade; road
// damage per km of route; value-noise roughness (lattice spacing, amplitude) on every surface and
// coarser on the verge beyond the sidewalk.
constexpr double kMaxWaveSlope = 0.012;
constexpr double kPatchesPerKm = 40;
constexpr double kPotholesPerKm = 15;
constexpr double kRoughCoarseM = 1.5, kRoughCoarseAmp = 0.006;
constexpr double kRoughFineM = 0.4, kRoughFineAmp = 0.012;
constexpr double kVergeRoughM = 0.8, kVergeRoughAmp = 0.025;
constexpr double kGridMarginM = 200;  // beyond the route's extent: more than any sensor's range

double SmoothStep(double e) {
  e = std::clamp(e, 0.0, 1.0);
  return e * e * (3 - 2 * e);
}

// Value noise in [-1, 1] on a lattice of spacing cell_m, C1 across lattice lines.
double ValueNoise(uint64_t seed, double x, double y, double cell_m) {
  const double fx = x / cell_m, fy = y / cell_m;
  const double x0 = std::floor(fx), y0 = std::floor(fy);
  const int64_t ix = int64_t(x0), iy = int64_t(y0);
  const auto v = [&](int64_t a, int64_t b) {  // one multiply-xorshift round: cheap, and enough
    uint64_t h =
        seed ^ (uint64_t(a) * 0x9e3779b97f4a7c15ull) ^ (uint64_t(b) * 0xc2b2ae3d27d4eb4full);
    h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
    return double((h ^ (h >> 32)) >> 11) * 0x1.0p-52 - 1.0;
  };
  const double u = SmoothStep(fx - x0), w = SmoothStep(fy - y0);
  const double a = v(ix, iy) + u * (v(ix + 1, iy) - v(ix, iy));
  const double b = v(ix, iy + 1) + u * (v(ix + 1, iy + 1) - v(ix, iy + 1));
  return a + w * (b - a);
}

Eigen::Vector3d RotZ(const Eigen::Vector3d& v, double c, double s) {
  return {c * v.x() - s * v.y(), s * v.x() + c * v.y(), v.z()};
}

Primitive Box(const Eigen::Vector3d& c, const Eigen::Vector3d& half, double yaw, Material m) {
  Primitive p;
  p.kind = Primitive::Kind::kBox;
  p.center = c;
  p.half = half;
  p.yaw = yaw;
  p.material = m;
  return p;
}
Primitive Cylinder(const Eigen::Vector3d& c, double r, double half_h, Material m) {
  Primitive p;
  p.kind = Primitive::Kind::kCylinder;
  p.center = c;
  p.half = {r, r, half_h};
  p.material = m;
  return p;
}
Primitive Ellipsoid(const Eigen::Vector3d& c, const Eigen::Vector3d& radii, Material m) {
  Primitive p;
  p.kind = Primitive::Kind::kEllipsoid;
  p.center = c;
  p.half = radii;
  p.material = m;
  return p;
}

// A frame along the route: origin on the axis at s, unit tangent and left normal.
struct Frame2 {
  Eigen::Vector2d o, t, n;
  Eigen::Vector3d At(double along, double lateral, double z) const {
    const Eigen::Vector2d q = o + t * along + n * lateral;
    return {q.x(), q.y(), z};
  }
  double yaw() const { return std::atan2(t.y(), t.x()); }
};

}  // namespace

float Reflectivity(Material m) {
  switch (m) {
    case Material::kAsphalt:
      return 0.40f;
    case Material::kMarking:
      return 0.80f;
    case Material::kConcrete:
      return 0.50f;
    case Material::kFacade:
      return 0.45f;
    case Material::kMetal:
      return 0.50f;
    case Material::kSign:
      return 0.95f;
    case Material::kBark:
      return 0.35f;
    case Material::kLeaves:
      return 0.45f;
    case Material::kCarPaint:
      return 0.50f;
    case Material::kSkin:
      return 0.40f;
    case Material::kBarrier:
      return 0.85f;
  }
  return 0.2f;
}

bool RetroReflective(Material m) { return m == Material::kSign || m == Material::kBarrier; }

bool Primitive::Intersect(const Eigen::Vector3d& p, const Eigen::Vector3d& d, double t_min,
                          double t_max, double* t, Eigen::Vector3d* normal) const {
  switch (kind) {
    case Kind::kBox: {
      // Slab test in the box frame; a ray starting inside ignores the box (the sensor inside
      // an object sees nothing of it).
      const double c = std::cos(yaw), s = std::sin(yaw);
      const Eigen::Vector3d lp = RotZ(p - center, c, -s), ld = RotZ(d, c, -s);
      double t0 = -kInf, t1 = kInf;
      int axis = 0;
      for (int k = 0; k < 3; ++k) {
        if (std::abs(ld[k]) < 1e-12) {
          if (std::abs(lp[k]) > half[k]) return false;
          continue;
        }
        double a = (-half[k] - lp[k]) / ld[k], b = (half[k] - lp[k]) / ld[k];
        if (a > b) std::swap(a, b);
        if (a > t0) t0 = a, axis = k;
        t1 = std::min(t1, b);
        if (t0 > t1) return false;
      }
      if (t0 <= t_min || t0 >= t_max) return false;
      Eigen::Vector3d ln = Eigen::Vector3d::Zero();
      ln[axis] = ld[axis] > 0 ? -1.0 : 1.0;
      *t = t0;
      *normal = RotZ(ln, c, s);
      return true;
    }
    case Kind::kCylinder: {
      const double r = half.x(), hh = half.z();
      const Eigen::Vector3d q = p - center;
      double best = kInf;
      Eigen::Vector3d bn = Eigen::Vector3d::UnitZ();
      const double a = d.x() * d.x() + d.y() * d.y();
      if (a > 1e-12) {
        const double b = q.x() * d.x() + q.y() * d.y();
        const double cc = q.x() * q.x() + q.y() * q.y() - r * r;
        const double disc = b * b - a * cc;
        if (disc >= 0 && cc > 0) {
          const double ts = (-b - std::sqrt(disc)) / a;
          const double z = q.z() + ts * d.z();
          if (ts > t_min && ts < t_max && std::abs(z) <= hh) {
            best = ts;
            bn = Eigen::Vector3d(q.x() + ts * d.x(), q.y() + ts * d.y(), 0).normalized();
          }
        }
      }
      if (std::abs(d.z()) > 1e-12 && std::abs(q.z()) > hh) {
        const double cap = q.z() > 0 ? hh : -hh;
        const double tc = (cap - q.z()) / d.z();
        const double x = q.x() + tc * d.x(), y = q.y() + tc * d.y();
        if (tc > t_min && tc < t_max && tc < best && x * x + y * y <= r * r) {
          best = tc;
          bn = Eigen::Vector3d(0, 0, cap > 0 ? 1 : -1);
        }
      }
      if (best == kInf) return false;
      *t = best;
      *normal = bn;
      return true;
    }
    case Kind::kEllipsoid: {
      const Eigen::Vector3d q = (p - center).cwiseQuotient(half), e = d.cwiseQuotient(half);
      const double a = e.squaredNorm(), b = q.dot(e), cc = q.squaredNorm() - 1.0;
      const double disc = b * b - a * cc;
      if (cc <= 0 || disc < 0) return false;
      const double te = (-b - std::sqrt(disc)) / a;
      if (te <= t_min || te >= t_max) return false;
      *t = te;
      *normal = (q + te * e).cwiseQuotient(half).normalized();
      return true;
    }
  }
  return false;
}

bool Primitive::Contains(const Eigen::Vector3d& q, double margin_m) const {
  const Eigen::Vector3d v = q - center;
  switch (kind) {
    case Kind::kBox: {
      const Eigen::Vector3d l = RotZ(v, std::cos(yaw), -std::sin(yaw));
      return (l.cwiseAbs() - half).maxCoeff() <= margin_m;
    }
    case Kind::kCylinder:
      return std::hypot(v.x(), v.y()) <= half.x() + margin_m &&
             std::abs(v.z()) <= half.z() + margin_m;
    case Kind::kEllipsoid:
      return v.cwiseQuotient(half + Eigen::Vector3d::Constant(margin_m)).norm() <= 1.0;
  }
  return false;
}

double Primitive::Radius() const {
  return kind == Kind::kBox ? std::hypot(half.x(), half.y()) : std::max(half.x(), half.y());
}

Route::Route(uint64_t seed, double length_m) {
  Rng rng(StreamSeed(seed, 0x726f757465));  // "route"
  Eigen::Vector2d p(0, 0);
  double heading = 0;
  pts_.push_back(p);
  cum_.push_back(0);
  while (cum_.back() < length_m) {
    const double len = rng.Uniform(250, 500);
    p += len * Eigen::Vector2d(std::cos(heading), std::sin(heading));
    pts_.push_back(p);
    cum_.push_back(cum_.back() + len);
    const double turn = rng.Uniform(20, 90) * kPi / 180;
    heading += rng.Chance(0.5) ? turn : -turn;
  }
  for (size_t i = 0; i + 1 < pts_.size(); ++i) dir_.push_back((pts_[i + 1] - pts_[i]).normalized());
}

Eigen::Vector2d Route::PointAt(double s) const {
  s = std::clamp(s, 0.0, length());
  const size_t i = std::min<size_t>(
      size_t(std::upper_bound(cum_.begin(), cum_.end(), s) - cum_.begin()) - 1, pts_.size() - 2);
  const double f = (s - cum_[i]) / (cum_[i + 1] - cum_[i]);
  return pts_[i] + f * (pts_[i + 1] - pts_[i]);
}

double Route::HeadingAt(double s) const {
  const Eigen::Vector2d d = PointAt(s + 6) - PointAt(s - 6);
  return std::atan2(d.y(), d.x());
}

double Route::SegmentDistance(size_t i, const Eigen::Vector2d& q, double* s) const {
  const Eigen::Vector2d aq = q - pts_[i];
  const double along = std::clamp(aq.dot(dir_[i]), 0.0, cum_[i + 1] - cum_[i]);
  *s = cum_[i] + along;
  return (aq - along * dir_[i]).norm();
}

double Route::DistanceTo(const Eigen::Vector2d& q) const {
  double best = kInf;
  for (size_t i = 0; i + 1 < pts_.size(); ++i) {
    const Eigen::Vector2d ab = pts_[i + 1] - pts_[i];
    const double f = std::clamp((q - pts_[i]).dot(ab) / ab.squaredNorm(), 0.0, 1.0);
    best = std::min(best, (q - pts_[i] - f * ab).norm());
  }
  return best;
}

void World::AddStatic(Primitive p) {
  const bool grounded = p.kind != Primitive::Kind::kEllipsoid && p.center.z() - p.half.z() < 0.01;
  p.center.z() += BaseHeight(p.center.x(), p.center.y());
  if (grounded) {  // sunk 0.5 m: the footprint of a building spans a few cm of undulation
    p.center.z() -= 0.25;
    p.half.z() += 0.25;
  }
  statics_.push_back(p);
}

World::World(uint64_t seed, int day, double route_length_m, const DayRates& rates)
    : noise_seed_(Mix(seed ^ 0x726f756768)), route_(seed, route_length_m) {
  // Layout draws come from the seed alone, so object ids and places agree on every day; each
  // object's state on a day comes from its own (seed, day, id) stream.
  Rng layout(StreamSeed(seed, 0x6c61796f7574));  // "layout"
  uint16_t next_id = 1;
  const auto day_rng = [&](uint16_t id) { return Rng(StreamSeed(seed, uint64_t(day) + 1, id)); };
  const auto frame_at = [&](double s) {
    const double h = route_.HeadingAt(s);
    Frame2 f;
    f.o = route_.PointAt(s);
    f.t = {std::cos(h), std::sin(h)};
    f.n = {-f.t.y(), f.t.x()};
    return f;
  };
  // Off-road objects must stay clear of every part of the road, including other segments
  // near corners.
  const auto clear = [&](const Eigen::Vector3d& c, double radius) {
    return route_.DistanceTo(c.head<2>()) >= kRoadHalfWidth + radius;
  };
  const double L = route_.length();
  const double km = L / 1000.0;

  {  // The ground: undulation and road damage from the seed alone, the same on every day.
    Rng g(StreamSeed(seed, 0x67726f756e64));  // "ground"
    for (int k = 0; k < 3; ++k) {
      const double wavelength = g.Uniform(80, 400), heading = g.Uniform(0, 2 * kPi);
      const double slope = g.Uniform(0.003, kMaxWaveSlope);  // this wave's steepest grade
      const double kk = 2 * kPi / wavelength;
      waves_.push_back(
          {kk * std::cos(heading), kk * std::sin(heading), slope / kk, g.Uniform(0, 2 * kPi)});
      wave_slope_ += slope;
      wave_curvature_ += slope * kk;
    }
    const auto road_disc = [&](double r_lo, double r_hi, double dz_lo, double dz_hi) {
      const double s = g.Uniform(0, L),
                   lat = g.Uniform(-kRoadHalfWidth + 0.6, kRoadHalfWidth - 0.6);
      const double r = g.Uniform(r_lo, r_hi), dz = g.Uniform(dz_lo, dz_hi);
      const Frame2 f = frame_at(s);
      const Eigen::Vector3d c = f.At(0, lat, 0);
      discs_.push_back({c.x(), c.y(), r, dz});
    };
    for (int k = 0; k < int(std::lround(kPatchesPerKm * km)); ++k)
      road_disc(0.5, 2.0, 0.004, 0.015);
    for (int k = 0; k < int(std::lround(kPotholesPerKm * km)); ++k)
      road_disc(0.15, 0.5, -0.06, -0.02);
    BuildGroundGrid();
  }

  for (double side : {-1.0, 1.0}) {
    for (double s = 0; s < L;) {  // building facades
      const double len = layout.Uniform(10, 40), depth = layout.Uniform(10, 20);
      const double height = layout.Uniform(5, 25), setback = layout.Uniform(0, 3);
      const Frame2 f = frame_at(s + len / 2);
      const double lat = kRoadHalfWidth + kSidewalkWidth + 0.5 + setback + depth / 2;
      Primitive b = Box(f.At(0, side * lat, height / 2), {len / 2, depth / 2, height / 2}, f.yaw(),
                        Material::kFacade);
      b.object_id = next_id++;
      if (clear(b.center, b.Radius() - 0.5 - setback)) AddStatic(b);
      s += len + layout.Uniform(0, 8);
    }
    for (double s = layout.Uniform(0, 30); s < L; s += layout.Uniform(28, 40)) {  // poles
      const Frame2 f = frame_at(s);
      const uint16_t id = next_id++;
      Primitive pole =
          Cylinder(f.At(0, side * (kRoadHalfWidth + 0.6), 4), 0.12, 4, Material::kMetal);
      pole.object_id = id;
      if (!clear(pole.center, 0.5)) continue;
      AddStatic(pole);
      if (layout.Chance(0.3)) {  // a sign on its own post next to the pole
        Primitive post =
            Cylinder(f.At(3, side * (kRoadHalfWidth + 0.4), 1.25), 0.04, 1.25, Material::kMetal);
        Primitive plate = Box(f.At(3, side * (kRoadHalfWidth + 0.4), 2.4), {0.03, 0.35, 0.35},
                              f.yaw(), Material::kSign);
        post.object_id = plate.object_id = next_id++;
        AddStatic(post);
        AddStatic(plate);
      }
    }
    for (double s = layout.Uniform(0, 15); s < L; s += layout.Uniform(12, 22)) {  // trees
      const Frame2 f = frame_at(s);
      const uint16_t id = next_id++;
      const double crown_r = layout.Uniform(1.5, 3.0), crown_h = layout.Uniform(1.5, 2.5);
      const double trunk_h = layout.Uniform(2.5, 4.0);
      const Eigen::Vector3d base = f.At(0, side * (kRoadHalfWidth + 2.8), 0);
      if (!clear(base, crown_r)) continue;
      Rng d = day_rng(id);
      const bool leafless = d.Chance(rates.leaf_loss);
      const double scale = (1.0 + rates.growth_per_day * day) * (leafless ? 0.55 : 1.0);
      Primitive trunk =
          Cylinder(base + Eigen::Vector3d(0, 0, trunk_h / 2), 0.15, trunk_h / 2, Material::kBark);
      Primitive crown = Ellipsoid(base + Eigen::Vector3d(0, 0, trunk_h + crown_h * 0.8),
                                  Eigen::Vector3d(crown_r, crown_r, crown_h) * scale,
                                  leafless ? Material::kBark : Material::kLeaves);
      trunk.object_id = crown.object_id = id;
      crown.label = std::abs(scale - 1.0) > 0.05 ? kChanged : kStatic;
      AddStatic(trunk);
      AddStatic(crown);
    }
    for (double s = layout.Uniform(0, 20); s < L; s += layout.Uniform(10, 40)) {  // bushes
      const Frame2 f = frame_at(s);
      const uint16_t id = next_id++;
      const double r = layout.Uniform(0.6, 1.2);
      const double scale = 1.0 + rates.growth_per_day * day;
      Primitive bush =
          Ellipsoid(f.At(0, side * (kRoadHalfWidth + kSidewalkWidth + r * 0.3), 0.5 * r),
                    Eigen::Vector3d(r, r, 0.8 * r) * scale, Material::kLeaves);
      bush.object_id = id;
      bush.label = std::abs(scale - 1.0) > 0.05 ? kChanged : kStatic;
      if (clear(bush.center, r * scale)) AddStatic(bush);
    }
    for (double s = 10; s < L; s += 7) {  // parking slots: occupied or not, day by day
      const uint16_t id = next_id++;
      if (!layout.Chance(0.5)) continue;
      Rng d = day_rng(id);
      if (!d.Chance(rates.parked_occupancy)) continue;
      const Frame2 f = frame_at(s + d.Uniform(-0.6, 0.6));
      const double yaw = f.yaw() + d.Uniform(-0.05, 0.05) + (d.Chance(0.5) ? kPi : 0);
      const Eigen::Vector3d c = f.At(0, side * (kRoadHalfWidth - 0.9), 0);
      if (route_.DistanceTo(c.head<2>()) < kRoadHalfWidth - 1.5) continue;  // corner overlap
      Primitive body =
          Box(c + Eigen::Vector3d(0, 0, 0.7), {2.2, 0.9, 0.4}, yaw, Material::kCarPaint);
      Primitive cabin =
          Box(c + Eigen::Vector3d(0, 0, 1.35), {1.1, 0.8, 0.25}, yaw, Material::kCarPaint);
      body.object_id = cabin.object_id = id;
      body.label = cabin.label = kChanged;
      AddStatic(body);
      AddStatic(cabin);
    }
    for (double s = layout.Uniform(100, 300); s < L; s += layout.Uniform(250, 400)) {
      const uint16_t id = next_id++;  // construction site: barriers and a scaffold
      Rng d = day_rng(id);
      if (!d.Chance(rates.construction)) continue;
      const Frame2 f = frame_at(s);
      for (int k = 0; k < 6; ++k) {
        Primitive barrier = Box(f.At(k * 2.2, side * (kRoadHalfWidth - 1.2), 0.5), {1.0, 0.1, 0.5},
                                f.yaw(), Material::kBarrier);
        barrier.object_id = id;
        barrier.label = kChanged;
        AddStatic(barrier);
      }
      for (int k = 0; k < 4; ++k) {
        Primitive post = Cylinder(f.At(k * 3.0, side * (kRoadHalfWidth + kSidewalkWidth - 0.3), 4),
                                  0.05, 4, Material::kMetal);
        Primitive deck = Box(f.At(k * 3.0 + 1.5, side * (kRoadHalfWidth + kSidewalkWidth - 0.6),
                                  2.0 + 2.0 * (k % 3)),
                             {1.5, 0.4, 0.03}, f.yaw(), Material::kMetal);
        post.object_id = deck.object_id = id;
        post.label = deck.label = kChanged;
        AddStatic(post);
        AddStatic(deck);
      }
    }
  }
  const int permanent = int(std::lround(rates.permanent_per_km * km));
  for (int k = 0; k < permanent; ++k) {  // new kiosks/buildings or signs from some day on
    const uint16_t id = next_id++;
    const double s = layout.Uniform(0, L);
    const double side = layout.Chance(0.5) ? 1.0 : -1.0;
    const int appear_day = 1 + int(layout.Uniform(0, 10));
    const bool building = layout.Chance(0.5);
    if (day < appear_day) continue;
    const Frame2 f = frame_at(s);
    if (building) {
      Primitive b = Box(f.At(0, side * (kRoadHalfWidth + kSidewalkWidth - 1.2), 1.5),
                        {2.0, 1.0, 1.5}, f.yaw(), Material::kFacade);
      b.object_id = id;
      b.label = kChanged;
      if (clear(b.center, 1.0)) AddStatic(b);
    } else {
      Primitive plate = Box(f.At(0, side * (kRoadHalfWidth + 0.3), 2.2), {0.03, 0.5, 0.5}, f.yaw(),
                            Material::kSign);
      Primitive post =
          Cylinder(f.At(0, side * (kRoadHalfWidth + 0.3), 1.0), 0.04, 1.0, Material::kMetal);
      plate.object_id = post.object_id = id;
      plate.label = post.label = kChanged;
      AddStatic(plate);
      AddStatic(post);
    }
  }

  Rng traffic(StreamSeed(seed, uint64_t(day) + 1, 0x7472616666));  // "traff"
  const auto add_movers = [&](double per_km, int kind) {
    const int n = int(std::lround(per_km * km));
    for (int k = 0; k < n; ++k) {
      Mover m;
      m.kind = kind;
      m.id = next_id++;
      m.s0 = traffic.Uniform(0, L);
      const bool forward = traffic.Chance(0.5);
      if (kind == 0) {
        m.speed = traffic.Uniform(7, 14);
        m.lateral = forward ? -5.25 : (traffic.Chance(0.5) ? 1.75 : 5.25);
      } else if (kind == 1) {
        m.speed = traffic.Uniform(3.5, 6.5);
        m.lateral = forward ? -6.8 : 6.8;
      } else {
        m.speed = traffic.Uniform(0.9, 1.6);
        m.lateral = (forward ? -1 : 1) * (kRoadHalfWidth + traffic.Uniform(0.8, 3.2));
        if (traffic.Chance(0.5)) m.speed = -m.speed;
      }
      if (kind != 2 && m.lateral > 0) m.speed = -m.speed;  // left of the axis drives backwards
      movers_.push_back(m);
    }
  };
  add_movers(rates.vehicles_per_km, 0);
  add_movers(rates.cyclists_per_km, 1);
  add_movers(rates.pedestrians_per_km, 2);
  BuildGrid();
}

std::vector<Primitive> World::DynamicAt(double t_s) const {
  std::vector<Primitive> out;
  const double L = route_.length();
  for (const Mover& m : movers_) {
    const double s = std::fmod(std::fmod(m.s0 + m.speed * t_s, L) + L, L);
    const double h = route_.HeadingAt(s) + (m.speed < 0 ? kPi : 0);
    const Eigen::Vector2d n(-std::sin(route_.HeadingAt(s)), std::cos(route_.HeadingAt(s)));
    const Eigen::Vector2d q = route_.PointAt(s) + n * m.lateral;
    const Eigen::Vector3d c(q.x(), q.y(), BaseHeight(q.x(), q.y()));
    const size_t first = out.size();
    if (m.kind == 0) {
      if (m.id % 5 == 0) {  // a truck
        out.push_back(
            Box(c + Eigen::Vector3d(0, 0, 1.7), {4.0, 1.25, 1.4}, h, Material::kCarPaint));
      } else {
        out.push_back(
            Box(c + Eigen::Vector3d(0, 0, 0.75), {2.25, 0.9, 0.45}, h, Material::kCarPaint));
        out.push_back(
            Box(c + Eigen::Vector3d(0, 0, 1.45), {1.2, 0.8, 0.25}, h, Material::kCarPaint));
      }
    } else if (m.kind == 1) {
      out.push_back(Box(c + Eigen::Vector3d(0, 0, 0.6), {0.85, 0.05, 0.3}, h, Material::kMetal));
      out.push_back(Cylinder(c + Eigen::Vector3d(0, 0, 1.3), 0.2, 0.35, Material::kSkin));
      out.push_back(Ellipsoid(c + Eigen::Vector3d(0, 0, 1.8), {0.12, 0.12, 0.13}, Material::kSkin));
    } else {
      out.push_back(Cylinder(c + Eigen::Vector3d(0, 0, 0.8), 0.22, 0.8, Material::kSkin));
      out.push_back(
          Ellipsoid(c + Eigen::Vector3d(0, 0, 1.72), {0.11, 0.11, 0.13}, Material::kSkin));
    }
    for (size_t i = first; i < out.size(); ++i) {
      out[i].label = kDynamic;
      out[i].object_id = m.id;
    }
  }
  return out;
}

void World::BuildGrid() {
  // The grid was laid out over the route by BuildGroundGrid; every static lies inside it.
  const Eigen::Vector2d lo = grid_min_;
  std::vector<std::vector<uint32_t>> cells(size_t(nx_) * ny_);
  for (uint32_t i = 0; i < statics_.size(); ++i) {
    const Primitive& p = statics_[i];
    const Eigen::Vector2d a = (p.center.head<2>() - lo).array() - p.Radius();
    const Eigen::Vector2d b = (p.center.head<2>() - lo).array() + p.Radius();
    for (int x = std::max(0, int(a.x() / cell_m_)); x <= std::min(nx_ - 1, int(b.x() / cell_m_));
         ++x)
      for (int y = std::max(0, int(a.y() / cell_m_)); y <= std::min(ny_ - 1, int(b.y() / cell_m_));
           ++y)
        cells[size_t(y) * nx_ + x].push_back(i);
  }
  cell_start_.assign(cells.size() + 1, 0);
  for (size_t c = 0; c < cells.size(); ++c)
    cell_start_[c + 1] = cell_start_[c] + uint32_t(cells[c].size());
  cell_items_.reserve(cell_start_.back());
  for (const auto& c : cells) cell_items_.insert(cell_items_.end(), c.begin(), c.end());
}

int World::CellOf(double x, double y) const {
  const double fx = std::floor((x - grid_min_.x()) / cell_m_);
  const double fy = std::floor((y - grid_min_.y()) / cell_m_);
  if (!(fx >= 0 && fy >= 0 && fx < nx_ && fy < ny_)) return -1;
  return int(fy) * nx_ + int(fx);
}

double World::Lateral(double x, double y, int cell, double* s) const {
  const Eigen::Vector2d q(x, y);
  double best = kInf, arc = 0;
  const auto consider = [&](size_t i) {
    double a;
    const double d = route_.SegmentDistance(i, q, &a);
    if (d < best) best = d, arc = a;
  };
  if (cell >= 0) {
    for (int16_t i : cell_segments_[size_t(cell)]) {
      if (i >= 0) consider(size_t(i));
    }
  } else {
    for (size_t i = 0; i < route_.segments(); ++i) consider(i);
  }
  if (s) *s = arc;
  return best;
}

double World::Profile(double d) const {
  const double edge = -kCamber * kRoadHalfWidth;
  if (d < kRoadHalfWidth) return -kCamber * d;
  if (d < kRoadHalfWidth + kCurbFace) return edge + kCurbHeight * (d - kRoadHalfWidth) / kCurbFace;
  const double walk = std::min(d, kRoadHalfWidth + kSidewalkWidth) - kRoadHalfWidth - kCurbFace;
  return edge + kCurbHeight + kSidewalkSlope * walk;
}

double World::Undulation(double x, double y) const {
  double z = 0;
  for (const Wave& w : waves_) z += w.amp * std::sin(w.kx * x + w.ky * y + w.phase);
  return z;
}

double World::Roughness(double x, double y, double lateral) const {
  double z = kRoughCoarseAmp * ValueNoise(noise_seed_ ^ 0x1111, x, y, kRoughCoarseM) +
             kRoughFineAmp * ValueNoise(noise_seed_ ^ 0x2222, x, y, kRoughFineM);
  const double verge = SmoothStep(lateral - (kRoadHalfWidth + kSidewalkWidth));
  if (verge > 0) z += verge * kVergeRoughAmp * ValueNoise(noise_seed_ ^ 0x3333, x, y, kVergeRoughM);
  return z;
}

double World::Discs(double x, double y, int cell) const {
  if (cell < 0) return 0;
  double z = 0;
  for (uint32_t k = disc_start_[size_t(cell)]; k < disc_start_[size_t(cell) + 1]; ++k) {
    const Disc& d = discs_[disc_items_[k]];
    const double r = std::hypot(x - d.x, y - d.y);
    if (r >= d.r) continue;
    if (d.dz < 0) {
      const double u = 1 - (r / d.r) * (r / d.r);
      z += d.dz * u * u;  // a bowl, flat-bottomed enough, smooth at its rim
    } else {
      z += d.dz * SmoothStep((d.r - r) / 0.05);  // a patch with a 5 cm bevelled edge
    }
  }
  return z;
}

double World::Height(double x, double y, int cell, bool detail) const {
  const double lat = Lateral(x, y, cell, nullptr);
  double z = Profile(lat) + Undulation(x, y);
  if (detail) z += Roughness(x, y, lat) + Discs(x, y, cell);
  return z;
}

double World::GroundHeight(double x, double y) const { return Height(x, y, CellOf(x, y), true); }
double World::BaseHeight(double x, double y) const { return Height(x, y, CellOf(x, y), false); }

Eigen::Vector3d World::GroundNormal(double x, double y) const {
  constexpr double e = 0.004;
  const double h = GroundHeight(x, y);
  const double hx = (GroundHeight(x + e, y) - h) / e, hy = (GroundHeight(x, y + e) - h) / e;
  return Eigen::Vector3d(-hx, -hy, 1).normalized();
}

Material World::GroundMaterial(double x, double y) const {
  double s = 0;
  const double lat = Lateral(x, y, CellOf(x, y), &s);
  if (lat >= kRoadHalfWidth) return Material::kConcrete;
  // Markings 15 cm wide: dashed (3 m of every 8 m) on the axis and between the lanes, solid
  // at the edge of the driving lanes.
  const double phase = s - 8 * std::floor(s / 8);
  const bool dash = phase >= 2.5 && phase <= 5.5;
  if ((lat < 0.075 && dash) || (std::abs(lat - 3.5) < 0.075 && dash) ||
      std::abs(lat - 6.9) < 0.075) {
    return Material::kMarking;
  }
  return Material::kAsphalt;
}

void World::BuildGroundGrid() {
  Eigen::Vector2d lo = Eigen::Vector2d::Constant(kInf), hi = -lo;
  for (double s = 0; s <= route_.length() + 10; s += 10) {
    lo = lo.cwiseMin(route_.PointAt(s));
    hi = hi.cwiseMax(route_.PointAt(s));
  }
  lo.array() -= kGridMarginM;
  hi.array() += kGridMarginM;
  grid_min_ = lo;
  nx_ = int((hi.x() - lo.x()) / cell_m_) + 1;
  ny_ = int((hi.y() - lo.y()) / cell_m_) + 1;
  const size_t cells = size_t(nx_) * size_t(ny_);
  const double half_diag = cell_m_ * std::sqrt(0.5);
  cell_segments_.assign(cells, {-1, -1, -1, -1});
  ground_lo_.assign(cells, 0);
  ground_hi_.assign(cells, 0);
  // Discs, each in every cell its bounding square touches.
  std::vector<std::vector<uint32_t>> by_cell(cells);
  for (uint32_t k = 0; k < discs_.size(); ++k) {
    const Disc& d = discs_[k];
    const int x0 = int(std::floor((d.x - d.r - lo.x()) / cell_m_));
    const int x1 = int(std::floor((d.x + d.r - lo.x()) / cell_m_));
    const int y0 = int(std::floor((d.y - d.r - lo.y()) / cell_m_));
    const int y1 = int(std::floor((d.y + d.r - lo.y()) / cell_m_));
    for (int y = std::max(0, y0); y <= std::min(ny_ - 1, y1); ++y)
      for (int x = std::max(0, x0); x <= std::min(nx_ - 1, x1); ++x)
        by_cell[size_t(y) * size_t(nx_) + size_t(x)].push_back(k);
  }
  disc_start_.assign(cells + 1, 0);
  for (size_t c = 0; c < cells; ++c)
    disc_start_[c + 1] = disc_start_[c] + uint32_t(by_cell[c].size());
  disc_items_.clear();
  for (const auto& c : by_cell) disc_items_.insert(disc_items_.end(), c.begin(), c.end());

  std::vector<std::pair<double, int>> dist(route_.segments());
  for (int cy = 0; cy < ny_; ++cy) {
    for (int cx = 0; cx < nx_; ++cx) {
      const size_t c = size_t(cy) * size_t(nx_) + size_t(cx);
      const Eigen::Vector2d center = lo + cell_m_ * Eigen::Vector2d(cx + 0.5, cy + 0.5);
      double s;
      for (size_t i = 0; i < dist.size(); ++i)
        dist[i] = {route_.SegmentDistance(i, center, &s), int(i)};
      std::sort(dist.begin(), dist.end());
      // Distance to a segment is 1-Lipschitz, so only segments within two half diagonals of the
      // nearest can be nearest anywhere in the cell; kept in index order, as the full scan.
      std::array<int16_t, 4> segs = {-1, -1, -1, -1};
      size_t n = 0;
      for (size_t i = 0; i < dist.size() && n < 4; ++i) {
        if (dist[i].first > dist[0].first + 2 * half_diag + 1e-6) break;
        segs[n++] = int16_t(dist[i].second);
      }
      std::sort(segs.begin(), segs.begin() + long(n));
      cell_segments_[c] = segs;
      // Bounds on the height in the cell. The profile is piecewise linear in the lateral
      // distance, which varies by at most a half diagonal from the centre's; the undulation is
      // bounded by its corner values and its curvature; roughness and discs by their amplitudes.
      const double d0 = std::max(0.0, dist[0].first - half_diag), d1 = dist[0].first + half_diag;
      double plo = std::min(Profile(d0), Profile(d1)), phi = std::max(Profile(d0), Profile(d1));
      for (double b :
           {kRoadHalfWidth, kRoadHalfWidth + kCurbFace, kRoadHalfWidth + kSidewalkWidth}) {
        if (b > d0 && b < d1) plo = std::min(plo, Profile(b)), phi = std::max(phi, Profile(b));
      }
      double ulo = kInf, uhi = -kInf;
      for (int k = 0; k < 4; ++k) {
        const double u =
            Undulation(lo.x() + cell_m_ * (cx + (k & 1)), lo.y() + cell_m_ * (cy + (k >> 1)));
        ulo = std::min(ulo, u), uhi = std::max(uhi, u);
      }
      const double sag = wave_curvature_ * 2 * half_diag * half_diag / 8 + 1e-4;
      double rough = kRoughCoarseAmp + kRoughFineAmp;
      if (d1 > kRoadHalfWidth + kSidewalkWidth) rough += kVergeRoughAmp;
      double dlo = 0, dhi = 0;
      for (uint32_t k = disc_start_[c]; k < disc_start_[c + 1]; ++k) {
        dlo += std::min(0.0, discs_[disc_items_[k]].dz);
        dhi += std::max(0.0, discs_[disc_items_[k]].dz);
      }
      ground_lo_[c] = float(plo + ulo - sag - rough + dlo - 1e-3);
      ground_hi_[c] = float(phi + uhi + sag + rough + dhi + 1e-3);
    }
  }
}

bool World::GroundSpan(const Eigen::Vector3d& origin, const Eigen::Vector3d& dir, double t0,
                       double t1, double lo, double hi, double* t_hit) const {
  const double oz = origin.z(), dz = dir.z();
  double ta = t0, tb = t1;
  if (dz < 0) {
    ta = std::max(ta, (hi - oz) / dz);
    tb = std::min(tb, (lo - oz) / dz);
  } else if (dz > 0) {
    ta = std::max(ta, (lo - oz) / dz);
    tb = std::min(tb, (hi - oz) / dz);
  } else if (oz > hi || oz < lo) {
    return false;
  }
  if (ta > tb) return false;
  const auto f = [&](double t) {
    const double x = origin.x() + t * dir.x(), y = origin.y() + t * dir.y();
    return oz + t * dz - GroundHeight(x, y);
  };
  // March in horizontal steps short enough for the roughness and the road damage (longer far
  // away, where the beams are metres apart anyway), then refine the bracketed crossing by
  // regula falsi (Illinois): the hit lies on the height field to a few micrometres.
  const double horiz = std::max(1e-3, std::hypot(dir.x(), dir.y()));
  const double dt = std::max(0.2, 0.005 * ta) / horiz;
  double a = ta, fa = f(ta);
  if (fa <= 0) {
    *t_hit = ta;
    return true;
  }
  while (a < tb) {
    const double b = std::min(tb, a + dt), fb = f(b);
    if (fb <= 0) {
      double lo_t = a, hi_t = b, flo = fa, fhi = fb;
      int side = 0;
      for (int k = 0; k < 40 && hi_t - lo_t > 1e-6; ++k) {
        const double m = (lo_t * fhi - hi_t * flo) / (fhi - flo);
        const double fm = f(m);
        if (std::abs(fm) < 1e-6) {
          hi_t = m;
          break;
        }
        if (fm > 0) {
          lo_t = m, flo = fm;
          if (side == 1) fhi /= 2;
          side = 1;
        } else {
          hi_t = m, fhi = fm;
          if (side == -1) flo /= 2;
          side = -1;
        }
      }
      *t_hit = hi_t;
      return true;
    }
    a = b, fa = fb;
  }
  return false;
}

bool World::Cast(const Eigen::Vector3d& origin, const Eigen::Vector3d& dir, double max_range_m,
                 const std::vector<Primitive>& dynamic, std::vector<uint32_t>* visited,
                 uint32_t stamp, Hit* hit) const {
  double best = max_range_m;
  bool found = false;
  const auto take = [&](const Primitive& p, double t, const Eigen::Vector3d& n) {
    best = t;
    found = true;
    hit->normal = n;
    hit->material = p.material;
    hit->label = p.label;
    hit->object_id = p.object_id;
  };
  if (dir.z() > 1e-9) best = std::min(best, (kMaxHeight - origin.z()) / dir.z());
  bool ground = false;
  double t;
  Eigen::Vector3d n;
  for (const Primitive& p : dynamic) {
    if (p.Intersect(origin, dir, 0.0, best, &t, &n)) take(p, t, n);
  }
  // 2D DDA over the grid cells the ray crosses, nearest first; stop once the best hit is
  // closer than the next cell boundary.
  const Eigen::Vector2d o = (origin.head<2>() - grid_min_) / cell_m_;
  const Eigen::Vector2d d2 = dir.head<2>();
  int cx = int(std::floor(o.x())), cy = int(std::floor(o.y()));
  const int sx = d2.x() > 0 ? 1 : -1, sy = d2.y() > 0 ? 1 : -1;
  const double inv_x = std::abs(d2.x()) > 1e-12 ? cell_m_ / std::abs(d2.x()) : kInf;
  const double inv_y = std::abs(d2.y()) > 1e-12 ? cell_m_ / std::abs(d2.y()) : kInf;
  double tx = inv_x == kInf ? kInf : ((sx > 0 ? cx + 1 - o.x() : o.x() - cx) * inv_x);
  double ty = inv_y == kInf ? kInf : ((sy > 0 ? cy + 1 - o.y() : o.y() - cy) * inv_y);
  double t_cell = 0;
  while (t_cell < best) {
    if (cx >= 0 && cy >= 0 && cx < nx_ && cy < ny_) {
      const size_t c = size_t(cy) * nx_ + cx;
      for (uint32_t k = cell_start_[c]; k < cell_start_[c + 1]; ++k) {
        const uint32_t i = cell_items_[k];
        if ((*visited)[i] == stamp) continue;
        (*visited)[i] = stamp;
        if (statics_[i].Intersect(origin, dir, 0.0, best, &t, &n)) {
          take(statics_[i], t, n);
          ground = false;
        }
      }
      // The ground where the ray crosses this cell, before anything already hit.
      const double t_end = std::min({tx, ty, best});
      if (t_end > t_cell &&
          GroundSpan(origin, dir, t_cell, t_end, ground_lo_[c], ground_hi_[c], &t)) {
        best = t;
        found = ground = true;
      }
    } else if ((cx < 0 && sx < 0) || (cy < 0 && sy < 0) || (cx >= nx_ && sx > 0) ||
               (cy >= ny_ && sy > 0)) {
      break;  // leaving the grid for good
    }
    if (tx < ty) {
      t_cell = tx;
      tx += inv_x;
      cx += sx;
    } else {
      t_cell = ty;
      ty += inv_y;
      cy += sy;
    }
  }
  if (ground) {  // material and normal only for the hit kept
    const Eigen::Vector3d q = origin + best * dir;
    hit->normal = GroundNormal(q.x(), q.y());
    hit->material = GroundMaterial(q.x(), q.y());
    hit->label = kStatic;
    hit->object_id = 0;
  }
  if (found) hit->range_m = best;
  return found && best < max_range_m;
}

}  // namespace dv::sim
