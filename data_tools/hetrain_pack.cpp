// hetrain-pack — converts image datasets into hetrain's HDF5 format (docs/dataset-format.md).
//
//   hetrain-pack idx --images I.gz --labels L.gz -o train.h5
//   hetrain-pack cifar data_batch_*.bin -o cifar10.h5 --val-fraction 0.1 --val-output val.h5
//   mpirun -n 8 hetrain-pack folder --root imagenet/train --size 224 --store jpeg --shards 256 -o train.h5
//   hetrain-pack synthetic --count 10000 --size 32 --channels 3 --classes 10 -o synth.h5
//   hetrain-pack detect-synthetic --split train --count 20000 --size 320 -o det-train.h5   (docs/detection.md)
//   hetrain-pack coco --images train2017 --annotations instances_train2017.json --size 640 -o coco.h5
//   hetrain-pack inspect train.h5 --verify
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "data/image.hpp"
#include "data/pack.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"
#include "tools.hpp"

namespace po = boost::program_options;
using namespace hetrain;
using namespace hetrain::data;

namespace {
const char* kUsage =
    "usage: hetrain-pack COMMAND [options]\n"
    "Converts image datasets into hetrain's HDF5 dataset format (docs/dataset-format.md).\n\n"
    "commands:\n"
    "  idx        MNIST-format IDX files, plain or gzip (e.g. Fashion-MNIST)\n"
    "  cifar      CIFAR-10 / CIFAR-100 binary batch files\n"
    "  folder     an ImageFolder tree of JPEG/PNG images (one sub-folder per class); parallel under mpirun\n"
    "  synthetic  seeded images with a learnable class structure (tests, benchmarks)\n"
    "  detect-synthetic  a detection dataset generated from Fashion-MNIST items (seeded; docs/detection.md)\n"
    "  coco       COCO-format detection data: an instances JSON file and its image folder\n"
    "  inspect    print a dataset's format, counts, classes, mean/std and shards; --verify checks it\n\n"
    "'hetrain-pack COMMAND --help' lists the options of a command.\n";

po::options_description output_options(PackOptions& o, int& gzip, bool& no_progress) {
  po::options_description d("output options");
  d.add_options()
      ("output,o", po::value(&o.output)->required(), "output file (the index file when sharded)")
      ("shards", po::value(&o.shards)->default_value(1), "number of shard files (1 = one plain file)")
      ("shard-size", po::value(&o.shard_size)->default_value(0),
       "at most this many samples per shard (overrides --shards)")
      ("chunk-samples", po::value(&o.write.chunk_samples)->default_value(0),
       "samples per HDF5 chunk along N (0 = auto, about 64 KiB per chunk)")
      ("compression", po::value(&gzip)->default_value(0), "gzip level 0-9 (0 = uncompressed, fastest reads)")
      ("val-fraction", po::value(&o.val_fraction)->default_value(0.0),
       "fraction of the samples moved to a validation set (seeded selection)")
      ("val-output", po::value(&o.val_output), "where the validation set goes (with --val-fraction)")
      ("split-seed", po::value(&o.split_seed)->default_value(0), "seed of the validation selection")
      ("no-progress", po::bool_switch(&no_progress), "no progress output on stderr");
  return d;
}

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t start = 0;
  for (;;) {
    size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  HT_CHECK(in, path, ": cannot open class-name file");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line != "\r") out.push_back(line.back() == '\r' ? line.substr(0, line.size() - 1) : line);
  return out;
}

// Parses args; returns false after printing help.
bool parse(const std::string& cmd, const std::vector<std::string>& args, po::options_description& own,
           po::options_description& out, po::variables_map& vm, const po::positional_options_description* pos,
           const char* what) {
  po::options_description all;
  all.add(own).add(out).add_options()("help,h", "this help");
  po::command_line_parser p(args);
  p.options(all);
  if (pos) p.positional(*pos);
  po::store(p.run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: hetrain-pack " << cmd << " [options]\n" << what << "\n\n" << all << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

// Debian's dataset-fashion-mnist, and the class names its IDX files do not carry.
const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
const char* kFashionMnistClasses = "T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot";

std::unique_ptr<SampleSource> open_idx_source(const std::string& cmd, const std::vector<std::string>& args,
                                              po::options_description& out, po::variables_map& vm, PackOptions& opt) {
  std::string class_names;
  std::string images, labels;
  int classes = 0;
  po::options_description own("idx options");
  own.add_options()
      ("images", po::value(&images)->required(), "IDX image file (idx3-ubyte, plain or .gz)")
      ("labels", po::value(&labels)->required(), "IDX label file (idx1-ubyte, plain or .gz)")
      ("classes", po::value(&classes)->default_value(0), "number of classes (0 = from the labels, at least 10)")
      ("class-names", po::value(&class_names), "comma-separated class names");
  if (!parse(cmd, args, own, out, vm, nullptr, "Packs MNIST-format IDX files (plain or gzip).")) return nullptr;
  opt.inputs = {{"--images", images}, {"--labels", labels}};
  return open_idx(images, labels, classes, split_names(class_names));
}

std::unique_ptr<SampleSource> open_cifar_source(const std::string& cmd, const std::vector<std::string>& args,
                                                po::options_description& out, po::variables_map& vm, PackOptions& opt) {
  std::string class_names, class_names_file;
  std::vector<std::string> files;
  int variant = 10;
  std::string label = "fine";
  po::options_description own("cifar options");
  own.add_options()
      ("batch", po::value(&files)->multitoken()->required(), "binary batch files (also positional)")
      ("variant", po::value(&variant)->default_value(10), "10 (CIFAR-10) or 100 (CIFAR-100)")
      ("label", po::value(&label)->default_value("fine"), "CIFAR-100 label: fine (100 classes) or coarse (20)")
      ("class-names", po::value(&class_names), "comma-separated class names")
      ("class-names-file", po::value(&class_names_file),
       "class names one per line (batches.meta.txt, fine_label_names.txt)");
  po::positional_options_description pos;
  pos.add("batch", -1);
  if (!parse(cmd, args, own, out, vm, &pos, "Packs CIFAR-10/100 binary batches.")) return nullptr;
  HT_CHECK(label == "fine" || label == "coarse", "--label must be fine or coarse, got ", quoted(label));
  for (const auto& f : files) opt.inputs.push_back({"CIFAR batch", f});
  if (!class_names_file.empty()) opt.inputs.push_back({"--class-names-file", class_names_file});
  auto names = class_names_file.empty() ? split_names(class_names) : read_lines(class_names_file);
  return open_cifar(files, variant, label == "fine", names);
}

std::unique_ptr<SampleSource> open_folder_source(const std::string& cmd, const std::vector<std::string>& args,
                                                 po::options_description& out, po::variables_map& vm,
                                                 PackOptions& opt) {
  std::string root, store = "raw";
  int size = 224, channels = 3;
  int64_t max_pixels = kDefaultMaxPixels;
  FolderStorage storage;
  po::options_description own("folder options");
  own.add_options()
      ("root", po::value(&root)->required(), "ImageFolder root: one sub-folder per class (also positional)")
      ("size", po::value(&size)->default_value(224),
       "the batches' height and width: raw storage resizes the shorter side to it and centre-crops; JPEG storage "
       "decodes to it when training (RandomResizedCrop with --augment rrc, else the evaluation transform)")
      ("channels", po::value(&channels)->default_value(3), "3 = RGB, 1 = greyscale")
      ("store", po::value(&store)->default_value("raw"),
       "raw = uint8 pixels at --size (small images) | jpeg = each image whole as a JPEG file, decoded by the "
       "reader (big datasets: about 1/6 of raw at 224 on photos; docs/dataset-format.md, \"JPEG storage\")")
      ("stored-size", po::value(&storage.stored_size)->default_value(0),
       "--store jpeg: shorter side of the stored images, at most (0 = --size x 256/224, e.g. 256 for 224)")
      ("quality", po::value(&storage.quality)->default_value(90),
       "--store jpeg: JPEG quality 1-100 of re-encoded images (JPEG files already small enough are kept as they are)")
      ("max-pixels", po::value(&max_pixels)->default_value(kDefaultMaxPixels),
       "refuse an image whose header claims more pixels (width x height) than this, naming the file, before it "
       "is decoded (a damaged or hostile header could claim gigabytes); 0 = no limit. The default is Pillow's");
  po::positional_options_description pos;
  pos.add("root", 1);
  if (!parse(cmd, args, own, out, vm, &pos,
             "Packs an ImageFolder tree of JPEG/PNG files. Under mpirun each rank writes its own shards."))
    return nullptr;
  HT_CHECK(store == "raw" || store == "jpeg", "--store must be raw or jpeg, got ", quoted(store));
  storage.jpeg = store == "jpeg";
  if (!storage.jpeg)
    for (const char* o : {"stored-size", "quality"})
      HT_CHECK(vm[o].defaulted(), "--", o, " applies to --store jpeg only: drop it or add --store jpeg");
  return open_folder(root, size, channels, storage, max_pixels);
}

std::unique_ptr<SampleSource> open_synthetic_source(const std::string& cmd, const std::vector<std::string>& args,
                                                    po::options_description& out, po::variables_map& vm,
                                                    PackOptions& opt) {
  int64_t count = 1000;
  int channels = 3, size = 32, height = 0, width = 0, classes = 10;
  uint64_t seed = 1;
  po::options_description own("synthetic options");
  own.add_options()
      ("count", po::value(&count)->default_value(1000), "number of samples")
      ("channels", po::value(&channels)->default_value(3), "channels per image")
      ("size", po::value(&size)->default_value(32), "height and width")
      ("height", po::value(&height)->default_value(0), "height (overrides --size)")
      ("width", po::value(&width)->default_value(0), "width (overrides --size)")
      ("classes", po::value(&classes)->default_value(10), "number of classes")
      ("seed", po::value(&seed)->default_value(1), "generator seed (same seed, same dataset)");
  if (!parse(cmd, args, own, out, vm, nullptr, "Writes seeded synthetic images with a learnable class structure."))
    return nullptr;
  const int h = height ? height : size, w = width ? width : size;
  check_sample_shape(height || width ? "--channels/--height/--width" : "--channels/--size " + std::to_string(size),
                     channels, h, w);
  return open_synthetic(seed, count, channels, h, w, classes);
}

std::unique_ptr<SampleSource> open_detect_synthetic_source(const std::string& cmd, const std::vector<std::string>& args,
                                                           po::options_description& out, po::variables_map& vm,
                                                           PackOptions& opt) {
  DetectSyntheticOptions d;
  std::string split = "train", dir = kFashionMnistDir;
  po::options_description own("detect-synthetic options");
  own.add_options()
      ("split", po::value(&split)->default_value("train"),
       "train: items from Fashion-MNIST's 60000 training images; test: from its 10000 test images")
      ("count", po::value(&d.count)->default_value(1000), "number of generated images")
      ("max-items", po::value(&d.max_items)->default_value(4), "items per image: 1 to this many")
      ("size", po::value(&d.size)->default_value(320),
       "output height and width: every canvas (128-320 px) is letterboxed to it")
      ("channels", po::value(&d.channels)->default_value(1), "1 = grey, 3 = seeded colour tints")
      ("seed", po::value(&d.seed)->default_value(1), "generator seed (same seed and split, same dataset)")
      ("fashion-mnist", po::value(&dir)->default_value(kFashionMnistDir),
       "folder of the Fashion-MNIST IDX files (Debian package dataset-fashion-mnist)");
  if (!parse(cmd, args, own, out, vm, nullptr,
             "Generates a detection dataset: Fashion-MNIST items pasted at 1-3x onto noisy canvases, "
             "letterboxed to --size; boxes are the items' tight bounds (docs/detection.md)."))
    return nullptr;
  HT_CHECK(split == "train" || split == "test", "--split must be train or test, got ", quoted(split));
  const std::string prefix = dir + "/" + (split == "train" ? "train" : "t10k");
  const std::string images = prefix + "-images-idx3-ubyte.gz", labels = prefix + "-labels-idx1-ubyte.gz";
  opt.inputs = {{"Fashion-MNIST images", images}, {"Fashion-MNIST labels", labels}};
  d.split_tag = split == "train" ? 0 : 1;
  std::shared_ptr<const SampleSource> items = open_idx(images, labels, 10, split_names(kFashionMnistClasses));
  return open_detect_synthetic(items, d);
}

std::unique_ptr<SampleSource> open_coco_source(const std::string& cmd, const std::vector<std::string>& args,
                                               po::options_description& out, po::variables_map& vm, PackOptions& opt) {
  std::string images, annotations;
  int size = 640, channels = 3;
  int64_t max_pixels = kDefaultMaxPixels;
  po::options_description own("coco options");
  own.add_options()
      ("images", po::value(&images)->required(), "folder of the images named by the annotations' file_name")
      ("annotations", po::value(&annotations)->required(), "COCO instances JSON file (e.g. instances_val2017.json)")
      ("size", po::value(&size)->default_value(640), "output height and width: each image is letterboxed to it")
      ("channels", po::value(&channels)->default_value(3), "3 = RGB, 1 = greyscale")
      ("max-pixels", po::value(&max_pixels)->default_value(kDefaultMaxPixels),
       "refuse an image whose header claims more pixels (width x height) than this, naming the file, before it "
       "is decoded (a damaged or hostile header could claim gigabytes); 0 = no limit. The default is Pillow's");
  if (!parse(cmd, args, own, out, vm, nullptr,
             "Packs COCO-format detection data: images letterboxed to --size, boxes as normalised "
             "(class, cx, cy, w, h), category ids mapped to contiguous classes (docs/detection.md)."))
    return nullptr;
  opt.inputs = {{"--annotations", annotations}};
  return open_coco(images, annotations, size, channels, max_pixels);
}

// The source commands: each reads its own options (after the output options) and opens its source;
// nullptr once it printed --help.
using SourceCommand = std::unique_ptr<SampleSource> (*)(const std::string& cmd, const std::vector<std::string>& args,
                                                        po::options_description& out, po::variables_map& vm,
                                                        PackOptions& opt);
const std::pair<const char*, SourceCommand> kSourceCommands[] = {
    {"idx", open_idx_source},
    {"cifar", open_cifar_source},
    {"folder", open_folder_source},
    {"synthetic", open_synthetic_source},
    {"detect-synthetic", open_detect_synthetic_source},
    {"coco", open_coco_source},
};

int run(int argc, char** argv, MPI_Comm comm) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 1 : 0;
  }
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "inspect") return tools::inspect_main(args);

  PackOptions opt;
  opt.comm = comm;
  int gzip = 0;
  bool no_progress = false;
  po::options_description out = output_options(opt, gzip, no_progress);
  po::variables_map vm;
  SourceCommand open_source = nullptr;
  for (const auto& [name, command] : kSourceCommands)
    if (cmd == name) open_source = command;
  if (!open_source) HT_THROW("unknown command '", cmd, "' (try hetrain-pack --help)");
  const std::unique_ptr<SampleSource> src = open_source(cmd, args, out, vm, opt);
  if (!src) return 0;  // --help
  opt.write.gzip_level = gzip;
  opt.progress = !no_progress;
  PackResult r = pack(*src, opt);
  int rank = 0, init = 0;
  MPI_Initialized(&init);
  if (init) MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    const bool boxes = src->meta.has_boxes;
    std::printf("wrote %s: %lld samples", opt.output.c_str(), (long long)r.train_count);
    if (boxes) std::printf(", %lld boxes", (long long)r.train_boxes);
    if (r.val_count) std::printf("; %s: %lld samples", opt.val_output.c_str(), (long long)r.val_count);
    if (r.val_count && boxes) std::printf(", %lld boxes", (long long)r.val_boxes);
    std::printf(" (%zu files)\n", r.files.size());
  }
  return 0;
}
}  // namespace

// Started by mpirun/srun (or asked to)? A plain run skips MPI_Init: OpenMPI's singleton start-up costs
// about a second, and one process needs no MPI (pack() then runs its collectives locally).
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_STEP_ID", "HETRAIN_PACK_MPI"})
    if (std::getenv(v)) return true;
  return false;
}

int main(int argc, char** argv) {
  // HDF5 1.10 crashes in its exit-time clean-up when a dataset's close failed earlier (a full disk): its own
  // clean-up runs only after a pack that succeeded (H5close below), never after an error.
  H5dont_atexit();
  const bool use_mpi = launched_by_mpi();
  int size = 1, rank = 0;
  if (use_mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  }
  // After MPI_Init, so these handlers are the ones in force: an interrupted pack leaves no temporary file.
  remove_temporaries_on_signals();
  int rc = 0;
  std::string message;
  try {
    rc = run(argc, argv, MPI_COMM_WORLD);
  } catch (const hetrain::Error& e) {
    message = e.message();
  } catch (const po::error& e) {
    message = std::string(e.what()) + " (see hetrain-pack " + (argc > 1 ? argv[1] : "") + " --help)";
  } catch (const std::exception& e) {
    message = e.what();
  }
  if (!message.empty()) {
    // pack() fails on every rank together; only the rank that hit the problem says why.
    bool echo = message.rfind("stopping: another rank failed", 0) == 0;
    if (echo) {
    } else if (size > 1)
      std::fprintf(stderr, "hetrain-pack: error: rank %d: %s\n", rank, message.c_str());
    else
      std::fprintf(stderr, "hetrain-pack: error: %s\n", message.c_str());
    std::fflush(stderr);
    // Under MPI even one rank aborts: MPI_Finalize would run HDF5's clean-up (crashing after a full disk).
    if (use_mpi) MPI_Abort(MPI_COMM_WORLD, 1);
    rc = 1;
  } else {
    H5close();
  }
  if (use_mpi) MPI_Finalize();
  return rc;
}
