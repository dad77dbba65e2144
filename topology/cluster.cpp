#include "topology/cluster.hpp"
