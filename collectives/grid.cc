#include "collectives/grid.h"

#include <algorithm>
#include <cstdlib>

namespace tessera {
namespace {

void Fill(Grid* g) {
  g->rows.assign(g->Y, std::vector<int>(g->X, -1));
  g->cols.assign(g->X, std::vector<int>(g->Y, -1));
  for (size_t r = 0; r < g->x.size(); ++r) {
    g->rows[g->y[r]][g->x[r]] = static_cast<int>(r);
    g->cols[g->x[r]][g->y[r]] = static_cast<int>(r);
  }
}

}  // namespace

Status MakeGrid(int nranks, int X, int Y, Grid* out) {
  if (X <= 0 || Y <= 0 || X * Y != nranks) {
    return InvalidArgument("grid " + std::to_string(X) + "x" + std::to_string(Y) + " does not hold " +
                           std::to_string(nranks) + " ranks");
  }
  Grid g;
  g.X = X;
  g.Y = Y;
  for (int r = 0; r < nranks; ++r) {
    g.x.push_back(r % X);
    g.y.push_back(r / X);
  }
  Fill(&g);
  *out = g;
  return Status::Ok();
}

Status GridFromHosts(const std::vector<int>& host_of_rank, Grid* out) {
  int hosts = 0;
  for (int h : host_of_rank) hosts = std::max(hosts, h + 1);
  std::vector<int> count(hosts, 0);
  Grid g;
  for (int h : host_of_rank) {
    g.x.push_back(count[h]++);
    g.y.push_back(h);
  }
  for (int c : count) {
    if (c != count[0]) return InvalidArgument("hosts have different numbers of ranks: no grid");
  }
  g.X = hosts > 0 ? count[0] : 1;
  g.Y = hosts;
  Fill(&g);
  *out = g;
  return Status::Ok();
}

Status ParseGrid(const std::string& spec, int nranks, Grid* out) {
  const size_t x = spec.find('x');
  char* end = nullptr;
  const long X = x == std::string::npos ? 0 : std::strtol(spec.c_str(), &end, 10);
  const bool ok_x = x != std::string::npos && end == spec.c_str() + x;
  const long Y = ok_x ? std::strtol(spec.c_str() + x + 1, &end, 10) : 0;
  if (!ok_x || *end != '\0' || X <= 0 || Y <= 0) {
    return InvalidArgument("TESSERA_TORUS='" + spec + "' is not XxY (e.g. 4x2)");
  }
  return MakeGrid(nranks, static_cast<int>(X), static_cast<int>(Y), out).Annotate("TESSERA_TORUS");
}

Status GridOfHostRows(const Grid& hosts, int k, Grid* out) {
  const int R = hosts.X, H = hosts.Y;
  if (k <= 0 || H % k != 0) {
    return InvalidArgument("rows of " + std::to_string(k) + " hosts do not divide " + std::to_string(H) + " hosts");
  }
  Grid g;
  g.X = k * R;
  g.Y = H / k;
  g.x.resize(hosts.x.size());
  g.y.resize(hosts.y.size());
  for (size_t r = 0; r < hosts.x.size(); ++r) {
    g.x[r] = hosts.x[r] + R * (hosts.y[r] % k);
    g.y[r] = hosts.y[r] / k;
  }
  Fill(&g);
  *out = std::move(g);
  return Status::Ok();
}

std::vector<int> TorusWidths(const Shape& s) {
  std::vector<int> widths;
  if (s.per_host <= 0 || s.hosts <= 1) return widths;
  for (int k = 1; k < s.hosts; ++k) {
    if (s.hosts % k == 0) widths.push_back(k * s.per_host);
  }
  return widths;
}

TorusGrids::TorusGrids(std::unique_ptr<Grid> forced, const Grid* hosts)
    : forced_(std::move(forced)), hosts_(hosts != nullptr ? std::make_unique<Grid>(*hosts) : nullptr) {}

TorusGrids::~TorusGrids() = default;

const Grid* TorusGrids::Default() const { return forced_ ? forced_.get() : hosts_.get(); }

const Grid* TorusGrids::OfWidth(int X) const {
  const Grid* d = Default();
  if (d != nullptr && d->X == X) return d;
  if (forced_ || !hosts_ || X % hosts_->X != 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = built_.find(X);
  if (it != built_.end()) return it->second.get();
  auto g = std::make_unique<Grid>();
  if (!GridOfHostRows(*hosts_, X / hosts_->X, g.get()).ok()) return nullptr;
  return built_.emplace(X, std::move(g)).first->second.get();
}

Status MakeLayoutGrids(const std::vector<int>& host_of_rank, const std::string& torus, const FabricShape& fabric,
                       LayoutGrids* out) {
  LayoutGrids g;
  const int p = static_cast<int>(host_of_rank.size());
  g.shape.p = p;
  g.shape.fabric = fabric;
  for (int h : host_of_rank) g.shape.hosts = std::max(g.shape.hosts, h + 1);
  Grid grid;
  if (GridFromHosts(host_of_rank, &grid).ok()) {
    g.host = std::make_unique<Grid>(grid);
    g.shape.per_host = grid.X;
  }
  std::unique_ptr<Grid> forced;
  if (!torus.empty()) {
    TESSERA_RETURN_IF_ERROR(ParseGrid(torus, p, &grid));
    forced = std::make_unique<Grid>(grid);
  }
  g.torus = std::make_unique<TorusGrids>(std::move(forced), g.host.get());
  if (const Grid* d = g.torus->Default()) {
    g.shape.torus_x = d->X;
    g.shape.torus_y = d->Y;
    g.shape.torus_forced = g.torus->forced();
  }
  *out = std::move(g);
  return Status::Ok();
}

}  // namespace tessera
