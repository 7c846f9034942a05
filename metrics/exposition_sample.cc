// Prints the sample /metrics page (sample_page.h) for promtool_test.sh to check with
// Prometheus' own parser.
#include <cstdio>

#include "metrics/exposition.h"
#include "metrics/sample_page.h"

int main() {
  std::fputs(tessera::PrometheusText(tessera::SamplePage()).c_str(), stdout);
  return 0;
}
