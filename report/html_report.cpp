// report/html_report.cpp — the self-contained HTML report (see report.hpp).
//
// Everything is inline: one <style> block and inline <svg> charts. No scripts,
// no images, fonts or stylesheets to fetch, so the file renders offline.
#include <fmt/format.h>

#include <cmath>

#include "report/charts.hpp"
#include "report/report.hpp"
#include "report/svg.hpp"

namespace dptwin::report {
namespace {

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 24px 32px; color: #222; background: #fff; max-width: 1400px; }
h1 { font-size: 24px; margin-bottom: 4px; } h2 { font-size: 20px; border-bottom: 2px solid #0072B2; padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 16px; margin-top: 22px; }
p.meta, p.note { color: #555; font-size: 13px; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0 16px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #eef3f8; } td.text, th.text { text-align: left; }
table.recommendations td { max-width: 640px; } table.recommendations td.reason { text-align: left; font-size: 12px; }
tr.oom td { color: #b00; } tr.infeasible td { color: #888; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; border: 1px solid #e5e5e5; padding: 4px; background: #fff; }
figcaption { font-size: 12px; color: #555; max-width: 640px; padding: 2px 6px 6px; }
nav ul { font-size: 14px; } code { background: #f4f4f4; padding: 0 3px; }
.kpi { display: inline-block; margin: 4px 18px 4px 0; font-size: 13px; } .kpi b { font-size: 18px; display: block; }
)";

std::string esc(const std::string& s) { return xml_escape(s); }

std::string opt_num(const std::optional<double>& v, const char* fmtstr, double scale = 1) {
  return v ? fmt::format(fmt::runtime(fmtstr), *v * scale) : "-";
}

std::string figure(const std::string& svg, const std::string& caption) {
  return fmt::format("<figure>{}<figcaption>{}</figcaption></figure>\n", svg, esc(caption));
}

std::string recommendations_table(const ReportData& d, size_t gi) {
  std::string o = "<table class=\"recommendations\"><tr><th class=\"text\">goal</th><th class=\"text\">configuration"
                  "</th><th class=\"text\">figure</th><th class=\"text\">why, and what limits it</th></tr>\n";
  for (const auto& r : d.recommendations[gi])
    o += fmt::format("<tr><td class=\"text\"><b>{}</b></td><td class=\"text\">{}</td><td class=\"text\">{}</td>"
                     "<td class=\"reason\">{}</td></tr>\n",
                     esc(r.kind), esc(r.config), esc(r.metric), esc(r.reason));
  return o + "</table>\n";
}

std::string points_table(const ReportData& d, const Group& g) {
  std::string o =
      "<table class=\"points\"><tr><th>#</th><th class=\"text\">series</th><th>devices</th><th>nodes</th>"
      "<th class=\"text\">status</th><th>step ms</th><th>tokens/s</th><th>scaling %</th><th>MFU %</th>"
      "<th>exposed comm %</th><th>memory GiB</th><th>$ / M tokens</th><th>time to train</th><th>cost to train</th>"
      "<th>slowdown, links / 2</th></tr>\n";
  for (size_t m : g.members) {
    const auto& p = d.points[m];
    const auto& r = p.result;
    const double exposed = r.step_time_s ? r.breakdown.exposed_comm_s / *r.step_time_s * 100 : NAN;
    o += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2f} / {:.1f}{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>\n",
        esc(r.status), m, esc(series_name(d.points, g.members, m)), r.devices, p.nodes, esc(r.status),
        opt_num(r.step_time_s, "{:.2f}", 1e3), r.tokens_per_s ? esc(format_rate(*r.tokens_per_s)) : "-",
        opt_num(r.scaling_efficiency, "{:.1f}", 100), opt_num(r.mfu, "{:.1f}", 100),
        std::isfinite(exposed) ? fmt::format("{:.1f}", exposed) : "-", r.memory.peak / 1073741824.0,
        r.memory.capacity / 1073741824.0, r.memory.oom ? " OOM" : "",
        r.cost_per_million_tokens ? esc(format_usd(*r.cost_per_million_tokens)) : "-",
        r.time_to_train_s ? esc(format_duration(*r.time_to_train_s)) : "-",
        r.cost_to_train ? esc(format_usd(*r.cost_to_train)) : "-",
        p.slowdown_pct() ? fmt::format("{:+.1f}%", *p.slowdown_pct()) : "-");
  }
  return o + "</table>\n";
}

std::string validation_section(const ValidationResult& v) {
  std::string o = "<section class=\"validation\" id=\"validation\"><h2>Validation: predicted vs measured</h2>\n";
  o += fmt::format("<p><span class=\"kpi\"><b>{:.1f}%</b>mean absolute error (MAPE)</span>"
                   "<span class=\"kpi\"><b>{:.1f}%</b>worst case</span><span class=\"kpi\"><b>{}</b>Kendall tau "
                   "(ranking agreement)</span><span class=\"kpi\"><b>{}</b>cases</span></p>\n",
                   v.summary.mape_pct, v.summary.worst_pct,
                   v.summary.kendall_tau ? fmt::format("{:.2f}", *v.summary.kendall_tau) : "-", v.cases.size());
  if (!v.profile.empty()) o += fmt::format("<p class=\"meta\">calibration profile: {}</p>\n", esc(v.profile));
  if (v.not_measured)
    o += fmt::format("<p class=\"meta\">{} further cases did not run or were not measured.</p>\n", v.not_measured);
  o += "<div class=\"charts\">";
  o += figure(chart_validation_scatter(v),
              "Each dot is one measured configuration; on the dashed line the prediction is exact.");
  o += figure(chart_validation_errors(v), "Absolute percentage error of each case; colour gives the sign.");
  o += "</div>\n<table class=\"validation\"><tr><th class=\"text\">case</th><th>predicted ms</th><th>measured ms</th>"
       "<th>error %</th></tr>\n";
  for (const auto& c : v.cases)
    o += fmt::format("<tr><td class=\"text\">{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:+.1f}</td></tr>\n",
                     esc(c.label), c.predicted_step_s * 1e3, c.measured_step_s * 1e3, c.error_pct);
  return o + "</table></section>\n";
}

}  // namespace

std::string render_html(const ReportData& d) {
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += fmt::format("<title>dptwin capacity-planning report: {}</title>\n", esc(d.header.scenario));
  o += fmt::format("<style>{}</style>\n</head>\n<body>\n", kStyle);
  o += fmt::format("<header><h1>Capacity-planning report: {}</h1>\n<p>{}</p>\n", esc(d.header.scenario),
                   esc(d.header.description));
  size_t ok = 0, oom = 0;
  for (const auto& p : d.points) ok += p.result.status == "ok", oom += p.result.status == "oom";
  o += fmt::format("<p class=\"meta\">scenario file: {} &middot; {} points ({} run, {} out of memory, {} infeasible) "
                   "&middot; {} model/cluster groups &middot; simulated in {:.2f} s</p>\n",
                   esc(d.header.file.empty() ? "(builtin)" : d.header.file), d.points.size(), ok, oom,
                   d.points.size() - ok - oom, d.groups.size(), d.simulate_seconds);
  std::string settings;
  if (d.options.profile_path) settings += fmt::format("calibration profile: {} &middot; ", esc(*d.options.profile_path));
  if (d.options.token_budget) settings += fmt::format("token budget: {} tokens &middot; ", format_count(*d.options.token_budget));
  else if (!d.points.empty() && d.points[0].result.time_to_train_s)
    settings += "token budget: from the scenario &middot; ";
  if (!d.options.command_line.empty()) settings += fmt::format("made with <code>{}</code>", esc(d.options.command_line));
  if (!settings.empty()) o += fmt::format("<p class=\"meta\">{}</p>\n", settings);
  o += "</header>\n<nav><ul>\n";
  for (size_t gi = 0; gi < d.groups.size(); ++gi)
    o += fmt::format("<li><a href=\"#g{}\">{}</a></li>\n", gi, esc(d.groups[gi].title));
  if (d.validation) o += "<li><a href=\"#validation\">Validation: predicted vs measured</a></li>\n";
  o += "</ul></nav>\n";

  for (size_t gi = 0; gi < d.groups.size(); ++gi) {
    const auto& g = d.groups[gi];
    o += fmt::format("<section class=\"group\" id=\"g{}\"><h2>{}</h2>\n<h3>Recommendations</h3>\n", gi, esc(g.title));
    o += recommendations_table(d, gi);
    o += "<h3>Charts</h3>\n<div class=\"charts\">\n";
    o += figure(chart_step_time(d.points, g), "Seconds per optimizer step (lower is better); x: devices used, log2.");
    o += figure(chart_throughput(d.points, g), "Tokens per second over all devices (higher is better).");
    o += figure(chart_efficiency(d.points, g),
                "Throughput / (devices x one-device throughput); the dashed line is linear scaling.");
    if (any_sensitivity(d.points, g))
      o += figure(chart_sensitivity(d.points, g),
                  "Step-time increase when every inter-node link runs at half bandwidth (multi-node points).");
    if (any_cost(d.points, g))
      o += figure(chart_cost(d.points, g), "USD per million tokens at the device-hour price.");
    if (any_time_to_train(d.points, g))
      o += figure(chart_time_to_train(d.points, g), "Wall-clock hours to train the token budget.");
    o += figure(chart_breakdown(d.points, g),
                "Per step on the critical device: compute, communication not hidden (exposed), communication "
                "overlapped with compute (hidden: it runs alongside compute, so bars exceed the step time by it), "
                "optimizer and framework overhead.");
    o += figure(chart_memory(d.points, g),
                "Peak memory on the fullest device, stacked by kind, against the device capacity (dashed); "
                "light-red bars marked OOM do not fit.");
    o += "</div>\n<h3>All points</h3>\n" + points_table(d, g) + "</section>\n";
  }
  if (d.validation) o += validation_section(*d.validation);
  o += "<footer><p class=\"note\">Made by dptwin, a digital twin of data-parallel training: every figure is a "
       "simulator prediction (discrete-event engine over the cluster graph). Sensitivity re-simulates each "
       "multi-node point with the inter-node (NIC) bandwidth halved. Self-contained file: no scripts and no "
       "network resources.</p></footer>\n</body>\n</html>\n";
  return o;
}

std::string render_markdown(const ReportData& d) {
  std::string o = fmt::format("# Capacity-planning report: {}\n\n{}\n\n", d.header.scenario, d.header.description);
  o += fmt::format("Scenario `{}`, {} points, simulated in {:.2f} s.", d.header.file.empty() ? "(builtin)" : d.header.file,
                   d.points.size(), d.simulate_seconds);
  if (d.options.profile_path) o += fmt::format(" Calibration profile `{}`.", *d.options.profile_path);
  if (d.options.token_budget) o += fmt::format(" Token budget {} tokens.", format_count(*d.options.token_budget));
  o += " Charts: see the HTML report next to this file.\n";
  for (size_t gi = 0; gi < d.groups.size(); ++gi) {
    const auto& g = d.groups[gi];
    o += fmt::format("\n## {}\n\n| goal | configuration | figure | why |\n|---|---|---|---|\n", g.title);
    for (const auto& r : d.recommendations[gi])
      o += fmt::format("| {} | {} | {} | {} |\n", r.kind, r.config, r.metric, r.reason);
    o += "\n| series | devices | status | step ms | tokens/s | scaling % | $ / M tokens | time to train | links / 2 |\n"
         "|---|---:|---|---:|---:|---:|---:|---:|---:|\n";
    for (size_t m : g.members) {
      const auto& p = d.points[m];
      const auto& r = p.result;
      o += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", series_name(d.points, g.members, m),
                       r.devices, r.status, opt_num(r.step_time_s, "{:.2f}", 1e3),
                       r.tokens_per_s ? format_rate(*r.tokens_per_s) : "-",
                       opt_num(r.scaling_efficiency, "{:.1f}", 100),
                       r.cost_per_million_tokens ? format_usd(*r.cost_per_million_tokens) : "-",
                       r.time_to_train_s ? format_duration(*r.time_to_train_s) : "-",
                       p.slowdown_pct() ? fmt::format("{:+.1f}%", *p.slowdown_pct()) : "-");
    }
  }
  if (d.validation) {
    const auto& v = *d.validation;
    o += fmt::format("\n## Validation: predicted vs measured\n\nMAPE {:.1f}%, worst {:.1f}%, Kendall tau {}, {} cases.\n\n"
                     "| case | predicted ms | measured ms | error % |\n|---|---:|---:|---:|\n",
                     v.summary.mape_pct, v.summary.worst_pct,
                     v.summary.kendall_tau ? fmt::format("{:.2f}", *v.summary.kendall_tau) : "-", v.cases.size());
    for (const auto& c : v.cases)
      o += fmt::format("| {} | {:.2f} | {:.2f} | {:+.1f} |\n", c.label, c.predicted_step_s * 1e3,
                       c.measured_step_s * 1e3, c.error_pct);
  }
  return o;
}

}  // namespace dptwin::report
