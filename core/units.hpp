// core/units.hpp — typed time and quantities used across dptwin.
//
// Time is an integer count of nanoseconds (like ns-3's Time): events are ordered
// exactly and sums never drift. Quantities (bytes, FLOPs, rates) are doubles
// wrapped in distinct types so that bytes and FLOPs cannot be mixed by accident.
// All unit conversion lives in this header.
//
// Thread-safety: value types, freely copyable.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace dptwin {

// Integer simulated time in nanoseconds.
class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ns(int64_t v) { return Time(v); }
  static constexpr Time us(double v) { return from_seconds(v * 1e-6); }
  static constexpr Time ms(double v) { return from_seconds(v * 1e-3); }
  // Rounds to the nearest nanosecond; negative or NaN inputs are a caller bug.
  static constexpr Time from_seconds(double s) {
    return Time(static_cast<int64_t>(s * 1e9 + (s >= 0 ? 0.5 : -0.5)));
  }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t count_ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr double milliseconds() const { return static_cast<double>(ns_) * 1e-6; }
  constexpr double microseconds() const { return static_cast<double>(ns_) * 1e-3; }

  constexpr Time operator+(Time o) const { return Time(ns_ + o.ns_); }
  constexpr Time operator-(Time o) const { return Time(ns_ - o.ns_); }
  constexpr Time& operator+=(Time o) { ns_ += o.ns_; return *this; }
  constexpr Time& operator-=(Time o) { ns_ -= o.ns_; return *this; }
  constexpr Time operator*(int64_t k) const { return Time(ns_ * k); }
  constexpr Time scaled(double k) const { return from_seconds(seconds() * k); }
  constexpr auto operator<=>(const Time&) const = default;

 private:
  constexpr explicit Time(int64_t v) : ns_(v) {}
  int64_t ns_ = 0;
};

constexpr Time max(Time a, Time b) { return a < b ? b : a; }
constexpr Time min(Time a, Time b) { return a < b ? a : b; }

// A double-valued quantity tagged with its dimension.
template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double v) : v_(v) {}
  constexpr double value() const { return v_; }

  constexpr Quantity operator+(Quantity o) const { return Quantity(v_ + o.v_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(v_ - o.v_); }
  constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
  constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
  constexpr Quantity operator*(double k) const { return Quantity(v_ * k); }
  constexpr Quantity operator/(double k) const { return Quantity(v_ / k); }
  constexpr double operator/(Quantity o) const { return v_ / o.v_; }
  constexpr auto operator<=>(const Quantity&) const = default;

 private:
  double v_ = 0.0;
};

template <typename Tag>
constexpr Quantity<Tag> operator*(double k, Quantity<Tag> q) { return q * k; }

struct BytesTag {};
struct FlopsTag {};
struct BandwidthTag {};  // bytes per second
struct FlopRateTag {};   // FLOP per second

using Bytes = Quantity<BytesTag>;          // a size in bytes
using Flops = Quantity<FlopsTag>;          // a count of floating-point operations
using Bandwidth = Quantity<BandwidthTag>;  // bytes per second
using FlopRate = Quantity<FlopRateTag>;    // FLOP per second

// Size constructors (binary for memory sizes, decimal for rates, as vendors do).
constexpr Bytes bytes(double v) { return Bytes(v); }
constexpr Bytes kib(double v) { return Bytes(v * 1024.0); }
constexpr Bytes mib(double v) { return Bytes(v * 1024.0 * 1024.0); }
constexpr Bytes gib(double v) { return Bytes(v * 1024.0 * 1024.0 * 1024.0); }
constexpr Bytes kb(double v) { return Bytes(v * 1e3); }
constexpr Bytes mb(double v) { return Bytes(v * 1e6); }
constexpr Bytes gb(double v) { return Bytes(v * 1e9); }

constexpr Bandwidth bytes_per_s(double v) { return Bandwidth(v); }
constexpr Bandwidth gbyte_per_s(double v) { return Bandwidth(v * 1e9); }   // GB/s
constexpr Bandwidth gbit_per_s(double v) { return Bandwidth(v * 1e9 / 8.0); }  // Gb/s

constexpr FlopRate flop_per_s(double v) { return FlopRate(v); }
constexpr FlopRate tflop_per_s(double v) { return FlopRate(v * 1e12); }

// Transfer/compute durations. REQUIRES: rate > 0.
constexpr double seconds_for(Bytes b, Bandwidth bw) { return b.value() / bw.value(); }
constexpr double seconds_for(Flops f, FlopRate r) { return f.value() / r.value(); }
constexpr Time time_for(Bytes b, Bandwidth bw) { return Time::from_seconds(seconds_for(b, bw)); }
constexpr Time time_for(Flops f, FlopRate r) { return Time::from_seconds(seconds_for(f, r)); }

// Rate achieved moving `b` bytes in `t`.
inline Bandwidth rate_of(Bytes b, Time t) { return Bandwidth(b.value() / t.seconds()); }

}  // namespace dptwin
