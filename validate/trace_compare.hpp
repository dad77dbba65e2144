// validate/trace_compare.hpp — the measured and the predicted timeline of one
// validation case in one Chrome trace, side by side.
//
// side_by_side_trace() merges dptwin-exec's trace (pid = rank, tid 0 compute,
// tid 1 comm; every span carries args.step) with the simulator's timeline of
// the same case (sim::chrome_trace: pid = device, plus a "links" process):
// processes "measured rank R" first, then "predicted device N" /
// "predicted links", each side shifted to start at 0 so that the two line up
// in Perfetto or chrome://tracing. The measured side keeps two consecutive
// steps (the simulator prices two: a warm-up step and a steady one).
//
// Pure functions over JSON values; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dptwin::validate {

// The measured step to show from an exec result JSON: the measured step (not
// the first one measured) whose step time is nearest the median; -1 when the
// result has fewer than two measured steps.
int representative_step(const nlohmann::json& exec_result);

// The merged trace: `measured` steps step-1 and step, `predicted` whole.
// `label` and the figures land in the document's otherData.
nlohmann::json side_by_side_trace(const nlohmann::json& measured, int step, const nlohmann::json& predicted,
                                  const std::string& label, double measured_step_s, double predicted_step_s);

}  // namespace dptwin::validate
