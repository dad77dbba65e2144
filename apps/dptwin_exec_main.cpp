// apps/dptwin_exec_main.cpp — the `dptwin-exec` worker (one rank of a training run).
#include "exec/worker.hpp"

int main(int argc, char** argv) { return dptwin::exec::run_worker(argc, argv); }
