// sim/timeline.hpp — what happened during a simulated step, for traces and breakdowns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.hpp"

namespace dptwin::sim {

enum class StreamKind : uint8_t { Compute, Comm, Host };
enum class Category : uint8_t { Forward, Backward, Optimizer, Communication, Memcpy, Overhead, Negotiation };

std::string to_string(StreamKind s);
std::string to_string(Category c);

struct TimelineEvent {
  int device = 0;
  StreamKind stream = StreamKind::Compute;
  Category category = Category::Forward;
  std::string name;
  Time start, end;
  double bytes = 0;  // bytes moved (communication), 0 otherwise
};

struct LinkActivity {
  int link = 0;        // directed link id in the topology
  std::string name;    // link name
  Time start, end;
  double bytes = 0;    // bytes carried during [start, end)
};

struct Timeline {
  std::vector<TimelineEvent> events;    // devices recorded (see SimulationOptions::trace_devices)
  std::vector<LinkActivity> links;      // busy links
};

}  // namespace dptwin::sim
