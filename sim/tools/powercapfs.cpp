// erg-sim-powercapfs: a simulated machine's powercap tree served as the kernel serves sysfs, over
// FUSE — the opt-in, kernel-exact counterpart of the tree the simulator writes in place.
//
//   erg-sim-powercapfs [--state=STATE] MOUNTPOINT [-f] [-o OPTION,...]
//
// STATE is a simulated machine's state file (default $ERG_SIM_STATE). MOUNTPOINT becomes a sysfs
// root: MOUNTPOINT/devices/virtual/powercap/intel-rapl/intel-rapl:N[/intel-rapl:N:M]/{name,
// energy_uj,max_energy_range_uj,enabled} and the class links MOUNTPOINT/class/powercap/intel-rapl*
// (-> ../../devices/virtual/powercap/...), the layout PowercapTree::sysfs writes. Point
// ERG_POWERCAP_ROOT at MOUNTPOINT/class/powercap, node-exporter's --path.sysfs at MOUNTPOINT.
// Unmount with `fusermount3 -u MOUNTPOINT` (or SIGTERM/SIGINT the server).
//
// What differs from the in-place tree, and is the kernel's (drivers/powercap/powercap_sys.c and
// kernfs): each energy_uj read from offset 0 computes the counter at that moment
// (Machine::powercap_energy_uj: as of the latest RAPL update) and prints it "%lld\n" — variable
// width, no padding; a read at a later offset continues the text of the last offset-0 read on that
// open file (seq_file), so `cat` and a kept-open pread from offset 0 both see whole values. stat()
// reports st_size 4096 for every attribute whatever it holds; energy_uj is mode 0400
// (CVE-2020-8694), name and max_energy_range_uj 0444, enabled 0644 (writes are refused: EACCES);
// owner root (the server's user when it does not run as root); directories 0755; links report
// size 0. Mounted with default_permissions (the kernel enforces the modes) and, for root,
// allow_other. Reads are direct I/O (no page cache), one request at a time; poll answers "ready".
// Not served: constraint_*, power/, uevent, device/subsystem links, intel-rapl-mmio.

#define FUSE_USE_VERSION 31
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "erg/sim/machine.hpp"

namespace {

using erg::sim::Machine;

/// One entry of the served tree.
struct Node {
  enum Kind { kDir, kLink, kFile, kEnergy };
  Kind kind = kDir;
  mode_t mode = 0755;
  std::string text;                   // kFile: the content; kLink: the target
  std::size_t zone = 0;               // kEnergy: index in Machine::powercap_zones()
  std::vector<std::string> children;  // kDir: entry names, in creation order
};

struct Server {
  std::unique_ptr<Machine> machine;
  std::map<std::string, Node> nodes;  // by absolute path within the mount ("/" the root)
  timespec mounted{};

  void add(const std::string& path, Node n) {
    const std::size_t slash = path.find_last_of('/');
    const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
    if (parent != path) {
      if (nodes.find(parent) == nodes.end()) add(parent, Node{});
      nodes[parent].children.push_back(path.substr(slash + 1));
    }
    nodes[path] = std::move(n);
  }
  void add_dir(const std::string& path) {
    if (nodes.find(path) == nodes.end()) add(path, Node{});
  }
};

/// An open file: the text of its last read from offset 0 (kernfs keeps it in a seq_file).
struct Handle {
  std::string text;
  bool generated = false;
};

Server& server() { return *static_cast<Server*>(fuse_get_context()->private_data); }

std::string zone_entry(int zone, int sub) {
  std::string n = "intel-rapl:" + std::to_string(zone);
  if (sub >= 0) n += ":" + std::to_string(sub);
  return n;
}

/// The tree for these zones, as PowercapTree::sysfs lays it out.
void build(Server& s, const std::vector<Machine::PowercapZone>& zones) {
  s.add_dir("/");
  s.add_dir("/class/powercap");
  const std::string control = "/devices/virtual/powercap/intel-rapl";
  s.add_dir(control);
  s.add(control + "/enabled", Node{Node::kFile, 0644, "1\n"});
  s.add("/class/powercap/intel-rapl", Node{Node::kLink, 0777, "../../devices/virtual/powercap/intel-rapl"});
  for (std::size_t i = 0; i < zones.size(); ++i) {
    const auto& z = zones[i];
    std::string rel = zone_entry(z.zone, -1);
    if (z.sub >= 0) rel += "/" + zone_entry(z.zone, z.sub);
    const std::string dir = control + "/" + rel;
    s.add_dir(dir);
    s.add(dir + "/name", Node{Node::kFile, 0444, z.name + "\n"});
    s.add(dir + "/max_energy_range_uj", Node{Node::kFile, 0444, std::to_string(z.max_energy_range_uj) + "\n"});
    s.add(dir + "/energy_uj", Node{Node::kEnergy, 0400, "", i});
    s.add(dir + "/enabled", Node{Node::kFile, 0644, "1\n"});
    s.add("/class/powercap/" + zone_entry(z.zone, z.sub),
          Node{Node::kLink, 0777, "../../devices/virtual/powercap/intel-rapl/" + rel});
  }
}

const Node* find(const char* path) {
  auto& nodes = server().nodes;
  auto it = nodes.find(path);
  return it == nodes.end() ? nullptr : &it->second;
}

int do_getattr(const char* path, struct stat* st, fuse_file_info* /*fi*/) {
  const Node* n = find(path);
  if (n == nullptr) return -ENOENT;
  *st = {};
  // Root's, as sysfs's, when the server runs as root; else the server's user's (as the in-place
  // tree is its creator's), so that an unprivileged test can read its own 0400 files.
  st->st_uid = ::geteuid();
  st->st_gid = ::getegid();
  st->st_atim = st->st_mtim = st->st_ctim = server().mounted;
  st->st_blksize = 4096;
  switch (n->kind) {
    case Node::kDir:
      st->st_mode = S_IFDIR | n->mode;
      st->st_nlink = 2;
      break;
    case Node::kLink:
      st->st_mode = S_IFLNK | n->mode;
      st->st_nlink = 1;
      break;
    case Node::kFile:
    case Node::kEnergy:
      st->st_mode = S_IFREG | n->mode;
      st->st_nlink = 1;
      st->st_size = 4096;  // sysfs: one page, whatever the attribute holds
      break;
  }
  return 0;
}

int do_readlink(const char* path, char* buf, std::size_t size) {
  const Node* n = find(path);
  if (n == nullptr) return -ENOENT;
  if (n->kind != Node::kLink) return -EINVAL;
  if (size == 0) return -EINVAL;
  const std::size_t len = std::min(size - 1, n->text.size());
  std::memcpy(buf, n->text.data(), len);
  buf[len] = '\0';
  return 0;
}

int do_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t /*offset*/, fuse_file_info* /*fi*/,
               fuse_readdir_flags /*flags*/) {
  const Node* n = find(path);
  if (n == nullptr) return -ENOENT;
  if (n->kind != Node::kDir) return -ENOTDIR;
  const auto none = static_cast<fuse_fill_dir_flags>(0);
  fill(buf, ".", nullptr, 0, none);
  fill(buf, "..", nullptr, 0, none);
  for (const auto& c : n->children) fill(buf, c.c_str(), nullptr, 0, none);
  return 0;
}

int do_open(const char* path, fuse_file_info* fi) {
  const Node* n = find(path);
  if (n == nullptr) return -ENOENT;
  if (n->kind == Node::kDir) return -EISDIR;
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EACCES;  // nothing here is writable
  fi->direct_io = 1;  // every read reaches do_read: no page cache, no st_size truncation
  fi->fh = reinterpret_cast<std::uint64_t>(new Handle);
  return 0;
}

int do_read(const char* path, char* buf, std::size_t size, off_t offset, fuse_file_info* fi) {
  const Node* n = find(path);
  if (n == nullptr) return -ENOENT;
  auto* h = reinterpret_cast<Handle*>(fi->fh);
  if (offset == 0 || !h->generated) {
    if (n->kind == Node::kEnergy) {
      auto v = server().machine->powercap_energy_uj(n->zone);
      if (!v) return -EIO;
      char text[32];
      std::snprintf(text, sizeof text, "%lld\n", static_cast<long long>(*v));  // the kernel's format
      h->text = text;
    } else {
      h->text = n->text;
    }
    h->generated = true;
  }
  if (offset < 0) return -EINVAL;
  const auto off = static_cast<std::size_t>(offset);
  if (off >= h->text.size()) return 0;
  const std::size_t len = std::min(size, h->text.size() - off);
  std::memcpy(buf, h->text.data() + off, len);
  return static_cast<int>(len);
}

/// Always ready, never notified: what kernfs answers for an attribute nobody sysfs_notify()s
/// (DEFAULT_POLLMASK). Go's os.File registers regular files with epoll, so node-exporter polls.
/// (Implemented also because libfuse's high-level API leaks the poll handle without it.)
int do_poll(const char* /*path*/, fuse_file_info* /*fi*/, fuse_pollhandle* ph, unsigned* reventsp) {
  if (ph != nullptr) fuse_pollhandle_destroy(ph);
  *reventsp = POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM;
  return 0;
}

int do_release(const char* /*path*/, fuse_file_info* fi) {
  delete reinterpret_cast<Handle*>(fi->fh);
  return 0;
}

void* do_init(fuse_conn_info* /*conn*/, fuse_config* cfg) {
  cfg->direct_io = 1;
  cfg->kernel_cache = 0;
  return fuse_get_context()->private_data;
}

struct Options {
  char* state = nullptr;
};

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--state=STATE] MOUNTPOINT [-f] [-d] [-o OPTION,...]\n"
               "Serves the powercap tree of the simulated machine STATE (default $ERG_SIM_STATE) at\n"
               "MOUNTPOINT as sysfs does (MOUNTPOINT/class/powercap, values computed at each read).\n"
               "-f: stay in the foreground; unmount with fusermount3 -u MOUNTPOINT.\n",
               argv0);
}

/// Everything but the cleanup of what option parsing allocated (main's).
int run(fuse_args& args, Options& options, fuse_cmdline_opts& cmd, const char* argv0) {
  const fuse_opt specs[] = {{"--state=%s", offsetof(Options, state), 0}, FUSE_OPT_END};
  if (fuse_opt_parse(&args, &options, specs, nullptr) != 0) return 2;
  if (fuse_parse_cmdline(&args, &cmd) != 0) return 2;
  if (cmd.show_help || cmd.mountpoint == nullptr) {
    usage(argv0);
    return cmd.show_help ? 0 : 2;
  }
  std::string state = options.state != nullptr ? options.state : "";
  if (state.empty())
    if (const char* env = std::getenv("ERG_SIM_STATE"); env != nullptr) state = env;
  if (state.empty()) {
    std::fprintf(stderr, "erg-sim-powercapfs: no machine: pass --state=STATE or set ERG_SIM_STATE\n");
    return 2;
  }
  Server s;
  {
    // Attached before mounting, to fail early; again after daemonizing (threads do not survive
    // the fork).
    auto m = Machine::attach(state);
    if (!m) {
      std::fprintf(stderr, "erg-sim-powercapfs: %s\n", m.error().message.c_str());
      return 1;
    }
    build(s, (*m)->powercap_zones());
  }
  ::clock_gettime(CLOCK_REALTIME, &s.mounted);

  fuse_opt_add_arg(&args, "-odefault_permissions,fsname=erg-sim-powercap,subtype=erg-sim-powercapfs");
  if (::geteuid() == 0) fuse_opt_add_arg(&args, "-oallow_other");
  fuse_operations ops{};
  ops.getattr = do_getattr;
  ops.readlink = do_readlink;
  ops.readdir = do_readdir;
  ops.open = do_open;
  ops.read = do_read;
  ops.release = do_release;
  ops.poll = do_poll;
  ops.init = do_init;
  fuse* f = fuse_new(&args, &ops, sizeof ops, &s);
  if (f == nullptr) return 1;
  int rc = 1;
  if (fuse_mount(f, cmd.mountpoint) == 0) {
    if (fuse_daemonize(cmd.foreground) == 0) {
      auto m = Machine::attach(state);
      if (!m) {
        std::fprintf(stderr, "erg-sim-powercapfs: %s\n", m.error().message.c_str());
      } else {
        s.machine = std::move(*m);
        if (fuse_set_signal_handlers(fuse_get_session(f)) == 0) {
          rc = fuse_loop(f) == 0 ? 0 : 1;  // until unmounted or signalled
          fuse_remove_signal_handlers(fuse_get_session(f));
        }
      }
    }
    fuse_unmount(f);
  }
  fuse_destroy(f);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  fuse_args args = FUSE_ARGS_INIT(argc, argv);
  Options options;
  fuse_cmdline_opts cmd{};
  const int rc = run(args, options, cmd, argv[0]);
  std::free(cmd.mountpoint);
  std::free(options.state);
  fuse_opt_free_args(&args);
  return rc;
}
