#include "topology/device_spec.hpp"
