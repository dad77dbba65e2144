// report/result_json.hpp — reading sim::PointResult back from the simulator's JSON.
//
// The inverse of sim::point_to_json (schema in scenarios/README.md, "Outputs"):
// every field except the timeline, which is only summarised there. Used to
// gather results of MPI ranks (they travel as JSON text) and by tools that load
// a saved `dptwin sweep` / `dptwin simulate --format json` result.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "sim/results.hpp"

namespace dptwin::report {

// REQUIRES: j has the point schema; throws std::runtime_error naming the field otherwise.
sim::PointResult point_from_json(const nlohmann::ordered_json& j);

// Points of a `{points: [...]}` document or of a bare array, in index order.
std::vector<sim::PointResult> points_from_json(const nlohmann::ordered_json& doc);

}  // namespace dptwin::report
