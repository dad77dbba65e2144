#include "topology/topology.hpp"
