// The recording half of tests/tools/folder_trace.sh: __cyg_profile_func_enter
// / _exit for a cfgmask binary built with -finstrument-functions, loaded with
// LD_PRELOAD (glibc's own versions do nothing; the executable calls them
// through its PLT, so these take their place).  Never linked into a build.
//
// Each instrumented function is mapped to the engine folder of the file that
// defines it ($CFGMASK_FOLDER_MAP, written by folder_trace.py from the
// binary's line table).  Per thread, control is followed as a tree of
// "stretches": a stretch is a run of frames in one folder, and a call into a
// function of another folder opens a child stretch.  Consecutive calls from a
// stretch into the same folder share one child (its count says how many);
// past 64 children a stretch merges by folder, and past depth 12 no new
// stretches are opened -- the tree stays small however many calls the compile
// makes.  Functions of the ground floor (grammar/base) and of no engine
// folder never open a stretch.  The tree of every thread is written to
// $CFGMASK_FOLDER_TRACE at exit; folder_trace.py reads it.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Range {
  uintptr_t start;
  uintptr_t end;
  int32_t folder;
};

struct Node {
  int32_t folder;
  int32_t parent;
  int32_t depth;
  uintptr_t fn = 0;  // the function that opened the stretch (offset in the binary)
  uint64_t count = 1;
  std::vector<int32_t> children;
  std::map<int32_t, int32_t> by_folder;  // used past kMaxChildren
  bool merged = false;
};

struct Frame {
  int32_t node;  // the stretch this frame belongs to
};

struct ThreadTree {
  std::vector<Node> nodes;
  std::vector<Frame> stack;
  int id = 0;
};

constexpr size_t kMaxChildren = 64;
constexpr int32_t kMaxDepth = 12;

bool g_ready = false;
bool g_failed = false;
uintptr_t g_base = 0;
std::vector<Range> g_ranges;
std::vector<std::string> g_folders;
std::mutex g_mu;
std::vector<ThreadTree*> g_threads;
thread_local ThreadTree* t_tree = nullptr;
thread_local bool t_busy = false;

__attribute__((no_instrument_function)) void WriteAll();

__attribute__((no_instrument_function)) void Load(void* fn) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_ready || g_failed) return;
  const char* map = std::getenv("CFGMASK_FOLDER_MAP");
  FILE* f = map ? std::fopen(map, "r") : nullptr;
  if (!f) {
    g_failed = true;
    return;
  }
  Dl_info info;
  if (dladdr(fn, &info) && info.dli_fbase) g_base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  char kind[16];
  while (std::fscanf(f, "%15s", kind) == 1) {
    if (std::strcmp(kind, "F") == 0) {
      char name[256];
      if (std::fscanf(f, "%255s", name) != 1) break;
      g_folders.push_back(name);
    } else {
      unsigned long long start = 0, size = 0;
      int folder = 0;
      if (std::fscanf(f, "%llx %llx %d", &start, &size, &folder) != 3) break;
      g_ranges.push_back({g_base + start, g_base + start + size, folder});
    }
  }
  std::fclose(f);
  std::sort(g_ranges.begin(), g_ranges.end(),
            [](const Range& a, const Range& b) { return a.start < b.start; });
  std::atexit(WriteAll);
  g_ready = true;
}

__attribute__((no_instrument_function)) int32_t FolderOf(void* fn) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(fn);
  auto it = std::upper_bound(g_ranges.begin(), g_ranges.end(), a,
                             [](uintptr_t x, const Range& r) { return x < r.start; });
  if (it == g_ranges.begin()) return -1;
  --it;
  return a < std::max(it->end, it->start + 1) ? it->folder : -1;
}

__attribute__((no_instrument_function)) ThreadTree* Tree() {
  if (!t_tree) {
    t_tree = new ThreadTree;
    std::lock_guard<std::mutex> lock(g_mu);
    t_tree->id = static_cast<int>(g_threads.size());
    g_threads.push_back(t_tree);
  }
  return t_tree;
}

__attribute__((no_instrument_function)) int32_t Child(ThreadTree* t, int32_t parent,
                                                      int32_t folder, void* fn) {
  Node& p = t->nodes[parent];
  if (!p.children.empty() && t->nodes[p.children.back()].folder == folder) {
    ++t->nodes[p.children.back()].count;
    return p.children.back();
  }
  if (p.children.size() >= kMaxChildren) {
    p.merged = true;
    auto found = p.by_folder.find(folder);
    if (found != p.by_folder.end()) {
      ++t->nodes[found->second].count;
      return found->second;
    }
  }
  const int32_t id = static_cast<int32_t>(t->nodes.size());
  const int32_t depth = p.depth + 1;
  t->nodes.push_back(Node{folder, parent, depth, reinterpret_cast<uintptr_t>(fn) - g_base});
  t->nodes[parent].children.push_back(id);
  t->nodes[parent].by_folder[folder] = id;
  return id;
}

__attribute__((no_instrument_function)) void WriteAll() {
  const char* path = std::getenv("CFGMASK_FOLDER_TRACE");
  if (!path) return;
  std::lock_guard<std::mutex> lock(g_mu);
  FILE* out = std::fopen(path, "w");
  if (!out) return;
  for (size_t i = 0; i < g_folders.size(); ++i) std::fprintf(out, "F %zu %s\n", i, g_folders[i].c_str());
  for (ThreadTree* t : g_threads) {
    std::fprintf(out, "T %d %zu\n", t->id, t->nodes.size());
    for (size_t i = 0; i < t->nodes.size(); ++i) {
      const Node& n = t->nodes[i];
      std::fprintf(out, "N %zu %d %d %d %llu %d %llx\n", i, n.parent, n.depth, n.folder,
                   static_cast<unsigned long long>(n.count), n.merged ? 1 : 0,
                   static_cast<unsigned long long>(n.fn));
    }
  }
  std::fclose(out);
}

}  // namespace

extern "C" {

__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void* fn, void*) {
  if (t_busy) return;
  t_busy = true;
  if (!g_ready && !g_failed) Load(fn);
  if (g_ready) {
    ThreadTree* t = Tree();
    const int32_t folder = FolderOf(fn);
    if (t->stack.empty()) {
      if (t->nodes.empty()) t->nodes.push_back(Node{-1, -1, 0});
      t->stack.push_back({0});
    }
    const int32_t cur = t->stack.back().node;
    const int32_t cur_folder = t->nodes[cur].folder;
    int32_t node = cur;
    if (folder >= 0 && folder != cur_folder && t->nodes[cur].depth < kMaxDepth) {
      node = Child(t, cur, folder, fn);
    }
    t->stack.push_back({node});
  }
  t_busy = false;
}

__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void*, void*) {
  if (t_busy || !g_ready) return;
  ThreadTree* t = t_tree;
  if (t && t->stack.size() > 1) t->stack.pop_back();
}

}  // extern "C"
