#include "sim/flow_solver.hpp"
