// The file of ferry_test_pch (tests/CMakeLists.txt), the target whose
// precompiled headers every test executable reuses. It has no code.
