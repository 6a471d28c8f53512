// Conveyor's trainer executable. Everything happens in RunCli (trainer/cli.h).
#include <iostream>
#include <string>
#include <vector>

#include "trainer/cli.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return conveyor::RunCli(args, std::cout, std::cerr);
}
