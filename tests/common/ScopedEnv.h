// ScopedEnv.h - sets an environment variable (one of the library's TCQR_* tunables) for a scope and restores its
// previous value, or its absence, at the end, also when an assertion's exception unwinds the test.
#pragma once

#include <cstdlib>
#include <string>

namespace tcqr_test {

class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name) : m_name(name) {
    const char* v = std::getenv(name);
    m_had = v != nullptr;
    if (m_had) m_saved = v;
  }
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name) { set(value); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (m_had) setenv(m_name.c_str(), m_saved.c_str(), 1);
    else unsetenv(m_name.c_str());
  }
  void set(const std::string& value) const { setenv(m_name.c_str(), value.c_str(), 1); }
  void unset() const { unsetenv(m_name.c_str()); }

 private:
  std::string m_name, m_saved;
  bool m_had = false;
};

}  // namespace tcqr_test
