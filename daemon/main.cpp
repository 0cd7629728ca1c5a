#include "erg/daemon/daemon.hpp"

int main(int argc, char** argv) { return erg::daemon::run_main(argc, argv); }
