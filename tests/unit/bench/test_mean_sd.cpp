// mean_sd() (k3/bench.hpp): the figures `k3host bench` prints as mean ± sd. Equal
// repetitions must give their value and an sd of exactly 0: a plain sum ÷ n is off by an
// ulp for most values, and the sd then came out as 1.4e-13 and was printed as
// "852.2 ± 0.000000000000143 kB".
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <k3/bench.hpp>

TEST_CASE("mean_sd: equal values give that value and an sd of exactly 0") {
  for (const double v : {0.1, 852.2e3 / 3.0, 1.0 / 7.0, 374123.456789, 6.02e23, 1e-300}) {
    CAPTURE(v);
    const std::vector<double> three{v, v, v};
    const k3::MeanSd ms = k3::mean_sd(three);
    CHECK(ms.n == 3);
    CHECK(ms.mean == v);
    CHECK(ms.sd == 0.0);
  }
  CHECK((0.1 + 0.1 + 0.1) / 3 != 0.1);  // the plain mean of equal values is not always the value
}

TEST_CASE("mean_sd: the sample sd (n - 1), NaN values left out, NaN mean for none") {
  const k3::MeanSd ms = k3::mean_sd({2, 4, std::nan(""), 4, 4, 5, 5, 7, 9});
  CHECK(ms.n == 8);
  CHECK(ms.mean == Approx(5.0).epsilon(1e-15));
  CHECK(ms.sd == Approx(std::sqrt(32.0 / 7.0)).epsilon(1e-15));
  CHECK(k3::mean_sd({1.5}).sd == 0.0);
  CHECK(std::isnan(k3::mean_sd({}).mean));
  CHECK(std::isnan(k3::mean_sd({std::nan("")}).mean));
}
