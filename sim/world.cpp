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

double Route::DistanceTo(const Eigen::Vector2d& q) const {
  double best = kInf;
  for (size_t i = 0; i + 1 < pts_.size(); ++i) {
    const Eigen::Vector2d ab = pts_[i + 1] - pts_[i];
    const double f = std::clamp((q - pts_[i]).dot(ab) / ab.squaredNorm(), 0.0, 1.0);
    best = std::min(best, (q - pts_[i] - f * ab).norm());
  }
  return best;
}

void World::AddStatic(Primitive p) { statics_.push_back(p); }

World::World(uint64_t seed, int day, double route_length_m, const DayRates& rates)
    : route_(seed, route_length_m) {
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

  for (double s = 0; s < L; s += 8) {  // curbs + sidewalks in 8 m chunks, markings
    const Frame2 f = frame_at(s + 4);
    for (double side : {-1.0, 1.0}) {
      const Eigen::Vector3d c = f.At(0, side * (kRoadHalfWidth + kSidewalkWidth / 2), 0.075);
      if (route_.DistanceTo(c.head<2>()) < kRoadHalfWidth + kSidewalkWidth / 2 - 0.5) continue;
      AddStatic(Box(c, {4.05, kSidewalkWidth / 2, 0.075}, f.yaw(), Material::kConcrete));
      AddStatic(
          Box(f.At(0, side * 3.5, 0.0025), {1.5, 0.075, 0.0025}, f.yaw(), Material::kMarking));
      AddStatic(
          Box(f.At(0, side * 6.9, 0.0025), {4.0, 0.075, 0.0025}, f.yaw(), Material::kMarking));
    }
    AddStatic(Box(f.At(0, 0, 0.0025), {1.5, 0.075, 0.0025}, f.yaw(), Material::kMarking));
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
    const Eigen::Vector3d c(q.x(), q.y(), 0);
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
  Eigen::Vector2d lo = Eigen::Vector2d::Constant(kInf), hi = -lo;
  for (const Primitive& p : statics_) {
    lo = lo.cwiseMin(p.center.head<2>() - Eigen::Vector2d::Constant(p.Radius()));
    hi = hi.cwiseMax(p.center.head<2>() + Eigen::Vector2d::Constant(p.Radius()));
  }
  grid_min_ = lo;
  nx_ = int((hi.x() - lo.x()) / cell_m_) + 1;
  ny_ = int((hi.y() - lo.y()) / cell_m_) + 1;
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
  if (dir.z() < -1e-9) {  // the ground plane z = 0
    const double tg = -origin.z() / dir.z();
    if (tg < best) {
      best = tg;
      found = true;
      const Eigen::Vector3d q = origin + tg * dir;
      hit->normal = Eigen::Vector3d::UnitZ();
      hit->material = route_.DistanceTo(q.head<2>()) < kRoadHalfWidth ? Material::kAsphalt
                                                                      : Material::kConcrete;
      hit->label = kStatic;
      hit->object_id = 0;
    }
  } else if (dir.z() > 1e-9) {
    best = std::min(best, (kMaxHeight - origin.z()) / dir.z());
  }
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
        if (statics_[i].Intersect(origin, dir, 0.0, best, &t, &n)) take(statics_[i], t, n);
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
  if (found) hit->range_m = best;
  return found && best < max_range_m;
}

}  // namespace dv::sim
