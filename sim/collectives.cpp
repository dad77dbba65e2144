#include "sim/collectives.hpp"
