// Dataset::read_encoded: the stored bytes of a JPEG dataset's samples (docs/dataset-format.md, "JPEG
// storage"). Each file's /jpeg_offsets is in memory once the file is open, so a run of consecutive samples
// of one file is one H5Dread of a byte range.
#include <mutex>

#include "data/shard.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {

void Dataset::read_encoded(const std::vector<int64_t>& indices, EncodedImages& out, int32_t* labels,
                           BoxList* boxes) {
  HT_CHECK(info_.jpeg, info_.path, ": stores raw pixels, not JPEG (read it with read())");
  const int64_t n = int64_t(indices.size()), N = info_.num_samples;
  for (int64_t i = 0; i < n; ++i)
    HT_CHECK(indices[i] >= 0 && indices[i] < N, info_.path, ": sample index ", indices[i], " outside [0, ", N, ")");
  if (boxes) HT_CHECK(info_.has_boxes, info_.path, ": boxes asked of a classification dataset (no /boxes)");
  out.offsets.assign(1, 0);
  std::vector<int> shard_of_request(static_cast<size_t>(n));
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  for (int64_t i = 0; i < n; ++i) {
    const int s = shards_.size() == 1 ? 0 : shard_of(indices[i]);
    shard_of_request[size_t(i)] = s;
    const Shard& sh = shard(s);
    const int64_t local = indices[i] - shard_begin_[s];
    out.offsets.push_back(out.offsets.back() + sh.jpeg_offsets[size_t(local) + 1] - sh.jpeg_offsets[size_t(local)]);
    if (labels) labels[i] = sh.labels[size_t(local)];
  }
  out.bytes.resize(size_t(out.offsets.back()));
  for (int64_t i = 0; i < n;) {
    const int s = shard_of_request[size_t(i)];
    Shard& sh = *shards_[s];
    int64_t e = i + 1;  // requests for consecutive samples of one file: one read
    while (e < n && shard_of_request[size_t(e)] == s && indices[e] == indices[e - 1] + 1) ++e;
    const int64_t first = indices[i] - shard_begin_[s], last = indices[e - 1] - shard_begin_[s];
    const hsize_t start = hsize_t(sh.jpeg_offsets[size_t(first)]),
                  count = hsize_t(sh.jpeg_offsets[size_t(last) + 1] - sh.jpeg_offsets[size_t(first)]);
    h5::Id fspace(H5Dget_space(sh.jpeg));
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    h5::Id mspace(H5Screate_simple(1, &count, nullptr));
    if (H5Dread(sh.jpeg, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, out.bytes.data() + out.offsets[size_t(i)]) < 0) {
      const std::string why = h5::last_error();
      sh.check_unchanged();  // a file changed under us says so rather than HDF5's symptom
      HT_THROW(sh.path, ": cannot read the JPEG bytes of samples ", first, "..", last, ": ", why);
    }
    ++read_calls_;
    i = e;
  }
  for (int64_t i = 0; i < n; ++i)
    if (i == 0 || shard_of_request[size_t(i)] != shard_of_request[size_t(i) - 1])
      shards_[shard_of_request[size_t(i)]]->check_unchanged();
  if (boxes) gather_boxes(indices, *boxes);
}

}  // namespace hetrain::data
