#include "collectives/cost_model.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <tuple>

namespace tessera {

LinkCost AcrossHosts(const CostModel& m, const Shape& s, int flows, double out) {
  const FabricShape& f = s.fabric;
  const int nics = std::max(1, f.nics);
  flows = std::max(1, flows);
  double beta = m.inter.beta * nics * ((flows + nics - 1) / nics);
  if (f.hosts_per_rack > 0 && f.uplink_share > 0) beta = std::max(beta, m.inter.beta * flows * out / f.uplink_share);
  return LinkCost{m.inter.alpha, beta, m.inter.floor};
}

double ShiftOut(const Shape& s, int k) {
  const int K = s.fabric.hosts_per_rack;
  if (K <= 0 || K >= s.hosts || k <= 0) return 0;
  return std::min(1.0, static_cast<double>(k) / K);
}

double XorOut(const Shape& s, int k) {
  const int K = s.fabric.hosts_per_rack;
  if (K <= 0 || K >= s.hosts || k <= 0) return 0;
  if (k >= K) return 1;
  return K % (2 * k) == 0 ? 0 : static_cast<double>(k) / K;
}

LinkCost SlowestLink(const CostModel& m, const Shape& s) {
  return s.hosts > 1 ? AcrossHosts(m, s, 1, ShiftOut(s, 1)) : m.intra;
}

namespace {

// Whether a leaders' step waits less for a core than one with every rank running: the
// probe measured alpha across where ranks outnumber cores, on hosts of equal counts.
bool LeadersWaitLess(const Shape& s) { return s.ranks_per_core > 1 && s.per_host >= 1; }

}  // namespace

LinkCost ScaledLeadersLink(const CostModel& m, const Shape& s) {
  if (!LeadersWaitLess(s)) return m.inter;
  const double shared = s.ranks_per_core;
  const double fewer = std::max(1.0, shared / s.per_host) / shared;
  return LinkCost{m.inter.alpha * fewer, m.inter.beta, m.inter.floor * fewer};
}

LinkCost LeadersLink(const CostModel& m, const Shape& s) {
  LinkCost l = ScaledLeadersLink(m, s);
  if (LeadersWaitLess(s) && m.leaders_alpha > 0) l.alpha = m.leaders_alpha;
  return l;
}

double StepSeconds(const LinkCost& l, double bytes) { return std::max(l.floor, l.alpha + bytes * l.beta); }

int Log2Floor(int v) {
  int l = 0;
  while ((2 << l) <= v) ++l;
  return v >= 1 ? l : 0;
}

double RingSeconds(int q, double n, const LinkCost& l, double share, double gamma, bool allreduce) {
  if (q <= 1) return 0;
  const double steps = allreduce ? 2.0 * (q - 1) : (q - 1);
  return steps * StepSeconds(l, n / q * share) + (q - 1.0) / q * n * gamma;
}

int CrossHostRounds(const Shape& s, int rounds) {
  const bool multi = s.hosts > 1;
  return multi && s.per_host > 0 ? Log2Floor(s.hosts) : (multi ? rounds : 0);
}

GridLinks GridLinksOf(const CostModel& m, const Shape& s, int X) {
  const bool multi = s.hosts > 1;
  const int R = s.per_host;
  const bool row_inside = !multi || (R > 0 && R % X == 0);
  const int hosts_per_row = R > 0 && X > R ? X / R : 1;
  GridLinks g;
  g.row = row_inside ? m.intra : AcrossHosts(m, s, 1, ShiftOut(s, 1));
  g.col = multi ? AcrossHosts(m, s, R > 0 ? std::min(X, R) : 1, ShiftOut(s, hosts_per_row)) : m.intra;
  return g;
}

GridPhaseSeconds GridPhases(const CostModel& m, const Shape& s, int X, int Y, size_t bytes) {
  const GridLinks g = GridLinksOf(m, s, X);
  GridPhaseSeconds t;
  t.block = static_cast<double>(bytes) / s.p;
  t.col = (Y - 1) * StepSeconds(g.col, t.block);
  t.row = (X - 1) * Y * StepSeconds(g.row, t.block);
  t.row_of_one_block = (X - 1) * StepSeconds(g.row, t.block);
  return t;
}

Status CostModel::FromTuningFile(const std::string& path, CostModel* out) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("TESSERA_TUNING_FILE=" + path + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return FromTuningText(text, path, out);
}

Status CostModel::FromTuningText(const std::string& text, const std::string& path, CostModel* out) {
  std::istringstream in(text);
  CostModel m = *out;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    line = line.substr(0, line.find('#'));
    std::istringstream ls(line);
    std::string key, eq;
    double v = 0;
    if (!(ls >> key)) continue;
    if (!(ls >> eq >> v) || eq != "=" || v <= 0) {
      return InvalidArgument(path + ":" + std::to_string(no) + ": expected 'key = positive number'");
    }
    if (key == "alpha_intra_us") m.intra.alpha = v * 1e-6;
    else if (key == "beta_intra_gbps") m.intra.beta = 1 / (v * 1e9);
    else if (key == "alpha_inter_us") m.inter.alpha = v * 1e-6;
    else if (key == "beta_inter_gbps") m.inter.beta = 1 / (v * 1e9);
    else if (key == "gamma_gbps") m.gamma = 1 / (v * 1e9);
    else if (key == "step_floor_inter_us") m.inter.floor = v * 1e-6;
    else if (key == "step_floor_intra_us") m.intra.floor = v * 1e-6;
    else return InvalidArgument(path + ":" + std::to_string(no) + ": unknown key '" + key + "'");
  }
  *out = m;
  return Status::Ok();
}

namespace {

// "HxR" with both positive and at most 1e6.
bool ParseLayout(const std::string& text, int* hosts, int* per_host) {
  const size_t x = text.find('x');
  if (x == std::string::npos || x == 0 || x + 1 == text.size() || text.size() > 15) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i != x && !std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  const long h = std::strtol(text.c_str(), nullptr, 10), r = std::strtol(text.c_str() + x + 1, nullptr, 10);
  if (h < 1 || r < 1 || h > 1000000 || r > 1000000) return false;
  *hosts = static_cast<int>(h);
  *per_host = static_cast<int>(r);
  return true;
}

bool ParseBytes(const std::string& text, size_t* bytes) {
  if (text.empty() || text.size() > 18) return false;
  for (char ch : text) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return false;
  }
  *bytes = static_cast<size_t>(std::strtoull(text.c_str(), nullptr, 10));
  return true;
}

}  // namespace

Status CostModel::ChoicesFromText(const std::string& text, const std::string& path,
                                  std::vector<MeasuredChoice>* out) {
  std::istringstream in(text);
  std::vector<MeasuredChoice> rows;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    line = line.substr(0, line.find('#'));
    std::istringstream ls(line);
    MeasuredChoice c;
    std::string layout, bytes, extra;
    if (!(ls >> c.collective)) continue;
    c.line = no;
    if (!(ls >> layout >> bytes >> c.algorithm) || (ls >> extra) || !ParseLayout(layout, &c.hosts, &c.per_host) ||
        !ParseBytes(bytes, &c.from_bytes)) {
      return InvalidArgument(path + ":" + std::to_string(no) +
                             ": expected 'COLLECTIVE HOSTSxRANKS_PER_HOST FROM_BYTES ALGORITHM'");
    }
    rows.push_back(c);
  }
  *out = rows;
  return Status::Ok();
}

Status CostModel::ChoicesFromFile(const std::string& path, std::vector<MeasuredChoice>* out) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("TESSERA_ALGO_TABLE=" + path + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ChoicesFromText(text, path, out);
}

std::string CostModel::ChoicesToText(const std::vector<MeasuredChoice>& rows) {
  std::string text;
  for (const MeasuredChoice& r : rows) {
    text += r.collective + " " + std::to_string(r.hosts) + "x" + std::to_string(r.per_host) + " " +
            std::to_string(r.from_bytes) + " " + r.algorithm + "\n";
  }
  return text;
}

Status CostModel::SaveChoices(const std::string& path, const std::string& header, std::vector<MeasuredChoice> rows) {
  auto key = [](const MeasuredChoice& r) { return std::make_tuple(r.collective, r.hosts, r.per_host, r.from_bytes); };
  std::vector<MeasuredChoice> before;
  if (!ChoicesFromFile(path, &before).ok()) before.clear();  // none yet, or not a table
  for (const MeasuredChoice& old : before) {
    const bool replaced =
        std::any_of(rows.begin(), rows.end(), [&](const MeasuredChoice& r) { return key(r) == key(old); });
    if (!replaced) rows.push_back(old);
  }
  std::sort(rows.begin(), rows.end(),
            [&](const MeasuredChoice& a, const MeasuredChoice& b) { return key(a) < key(b); });
  const std::string staged = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(staged, std::ios::trunc);
    out << "# " << header << "\n" << ChoicesToText(rows);
    if (!out.flush()) return SystemError("cannot write measured choices to " + staged);
  }
  if (std::rename(staged.c_str(), path.c_str()) != 0) {
    std::remove(staged.c_str());
    return SystemError("cannot replace " + path + " with the measured choices");
  }
  return Status::Ok();
}

std::string CostModel::ToString() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "alpha_intra %.1f us, beta_intra %.2f GB/s, alpha_inter %.1f us, beta_inter %.3f GB/s, gamma %.2f GB/s",
                intra.alpha * 1e6, 1e-9 / intra.beta, inter.alpha * 1e6, 1e-9 / inter.beta, 1e-9 / gamma);
  if (intra.floor > 0) {
    const size_t used = std::strlen(buf);
    std::snprintf(buf + used, sizeof(buf) - used, ", step floor inside %.1f us", intra.floor * 1e6);
  }
  if (inter.floor > 0) {
    const size_t used = std::strlen(buf);
    std::snprintf(buf + used, sizeof(buf) - used, ", step floor across %.1f us", inter.floor * 1e6);
  }
  if (leaders_alpha > 0) {
    const size_t used = std::strlen(buf);
    std::snprintf(buf + used, sizeof(buf) - used, ", leaders' alpha %.1f us", leaders_alpha * 1e6);
  }
  return buf;
}

}  // namespace tessera
