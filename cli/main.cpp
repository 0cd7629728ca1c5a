#include "app.hpp"

int main(int argc, char** argv) { return erg::cli::run(argc, argv); }
