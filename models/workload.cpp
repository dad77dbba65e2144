#include "models/workload.hpp"
