// A main() for fuzz targets built without libFuzzer (the default GCC
// build): runs every seed in the corpus directories given, then `-runs=N`
// inputs made by small deterministic mutations of them (byte flips,
// inserts, erases, truncations, splices; `-seed=S`, default 1). The same
// command line as libFuzzer's (`target -runs=N -seed=S corpus_dir...`), so
// tests/fuzz/run_fuzzer.sh runs either build. A crash aborts the process,
// and the input that caused it is written to $TEST_UNDECLARED_OUTPUTS_DIR
// (or the working directory) as crash-input.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The input being run, for the crash handler.
const std::string* g_current = nullptr;
char g_crash_path[4096];

void OnCrash(int sig) {
  if (g_current != nullptr) {
    const int fd = open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t ignored = write(fd, g_current->data(), g_current->size());
      (void)ignored;
      close(fd);
    }
    static const char kMsg[] = "fuzz driver: crash; input written to crash-input\n";
    ssize_t ignored = write(2, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void Run(const std::string& s) {
  g_current = &s;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  g_current = nullptr;
}

std::vector<std::string> ReadCorpus(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());  // deterministic order
  for (const std::string& n : names) {
    std::ifstream f(dir + "/" + n, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    out.push_back(s.str());
  }
  return out;
}

std::string Mutate(const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  std::string s = corpus[rng() % corpus.size()];
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 6) {
      case 0:  // flip a bit
        if (!s.empty()) s[rng() % s.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // set a byte to an interesting value
        if (!s.empty()) {
          static const unsigned char kValues[] = {0, 1, 0x7f, 0x80, 0xff, 0x40, 0x20};
          s[rng() % s.size()] = static_cast<char>(kValues[rng() % sizeof(kValues)]);
        }
        break;
      case 2:  // insert random bytes
        s.insert(s.empty() ? 0 : rng() % s.size(), std::string(1 + rng() % 8, static_cast<char>(rng())));
        break;
      case 3:  // erase a range
        if (!s.empty()) {
          const size_t at = rng() % s.size();
          s.erase(at, 1 + rng() % std::min<size_t>(16, s.size() - at));
        }
        break;
      case 4:  // truncate
        if (!s.empty()) s.resize(rng() % s.size());
        break;
      case 5: {  // splice with another seed
        const std::string& o = corpus[rng() % corpus.size()];
        if (!o.empty() && !s.empty()) {
          const size_t at = rng() % o.size();
          s = s.substr(0, rng() % s.size()) + o.substr(at);
        }
        break;
      }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 1000;
  uint64_t seed = 1;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-runs=", 0) == 0) {
      runs = std::atol(a.c_str() + 6);
    } else if (a.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(a.c_str() + 6, nullptr, 10);
    } else if (a[0] != '-') {
      for (std::string& s : ReadCorpus(a)) corpus.push_back(std::move(s));
    }
  }
  if (corpus.empty()) corpus.push_back("");
  const char* out_dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  std::snprintf(g_crash_path, sizeof(g_crash_path), "%s/crash-input", out_dir ? out_dir : ".");
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, OnCrash);
  // CPU time (std::clock): wall clocks are read only in common/.
  const std::clock_t start = std::clock();
  for (const std::string& s : corpus) Run(s);
  std::mt19937_64 rng(seed);
  for (long r = 0; r < runs; ++r) {
    Run(Mutate(corpus, rng));
  }
  const double secs = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  std::cout << "FIGURE fuzz driver: " << corpus.size() << " seeds + " << runs
            << " mutated inputs in " << secs << " CPU s (" << (runs / std::max(secs, 1e-9))
            << " execs per CPU second), no crash" << std::endl;
  return 0;
}
