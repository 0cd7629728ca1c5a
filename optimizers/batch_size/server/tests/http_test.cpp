#include <gtest/gtest.h>
TEST(Placeholder, Http) {}
