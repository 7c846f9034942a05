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

Status MakeLayoutGrids(const std::vector<int>& host_of_rank, const std::string& torus, LayoutGrids* out) {
  LayoutGrids g;
  const int p = static_cast<int>(host_of_rank.size());
  g.shape.p = p;
  for (int h : host_of_rank) g.shape.hosts = std::max(g.shape.hosts, h + 1);
  Grid grid;
  if (GridFromHosts(host_of_rank, &grid).ok()) {
    g.host = std::make_unique<Grid>(grid);
    g.shape.per_host = grid.X;
  }
  if (!torus.empty()) {
    TESSERA_RETURN_IF_ERROR(ParseGrid(torus, p, &grid));
    g.torus = std::make_unique<Grid>(grid);
  } else if (g.host) {
    g.torus = std::make_unique<Grid>(*g.host);
  }
  if (g.torus) {
    g.shape.torus_x = g.torus->X;
    g.shape.torus_y = g.torus->Y;
  }
  *out = std::move(g);
  return Status::Ok();
}

}  // namespace tessera
