#include "models/gpt2.hpp"
