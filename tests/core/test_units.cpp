#include <doctest.h>

#include "core/units.hpp"

using namespace dptwin;

TEST_CASE("Time is integer nanoseconds and rounds to nearest") {
  CHECK(Time::from_seconds(1.5e-9).count_ns() == 2);
  CHECK(Time::us(3).count_ns() == 3000);
  CHECK(Time::ms(2).count_ns() == 2'000'000);
  CHECK((Time::us(1) + Time::ns(5)).count_ns() == 1005);
  CHECK(Time::ms(1) * 3 == Time::ms(3));
  CHECK(Time::ms(2).scaled(0.25) == Time::us(500));
  CHECK(max(Time::us(1), Time::us(2)) == Time::us(2));
}

TEST_CASE("quantities convert with the right factors") {
  CHECK(mib(1).value() == 1048576.0);
  CHECK(gib(16).value() == 17179869184.0);
  CHECK(gbit_per_s(100).value() == doctest::Approx(12.5e9));
  // 1 GB over 10 GB/s is 0.1 s.
  CHECK(seconds_for(gb(1), gbyte_per_s(10)) == doctest::Approx(0.1));
  CHECK(time_for(Flops(125e12), tflop_per_s(125)) == Time::ms(1000));
  CHECK(rate_of(gb(1), Time::ms(100)).value() == doctest::Approx(1e10));
  CHECK((mib(1) + mib(1)) / mib(1) == doctest::Approx(2.0));
}
