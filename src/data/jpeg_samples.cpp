// Decoding a JPEG dataset's samples to the batch's C × H × W (docs/dataset-format.md, "JPEG storage"): each
// sample's window (RandomResizedCrop when training with --augment rrc, the evaluation transform otherwise)
// is chosen in the stored image's pixels from its header, the image is decoded at the smallest k/8 scale
// that keeps the window at least H × W, and the window is resampled to H × W.
#include <vector>

#include "data/image.hpp"
#include "data/sample_threads.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {

void decode_sample(const uint8_t* bytes, size_t size, int C, int H, int W, bool resized_crop, uint64_t aug_seed,
                   int64_t index, const std::string& what, uint8_t* out) {
  const JpegHeader hdr = read_jpeg_header(bytes, size, what);
  CropWindow win = resized_crop ? draw_resized_crop(aug_seed, index, hdr.height, hdr.width)
                                : centre_window(hdr.height, hdr.width, H, W);
  int sw = 0, sh = 0;
  jpeg_scaled_size(hdr.width, hdr.height, win.width, win.height, W, H, &sw, &sh);
  const Image img = decode_jpeg_bytes(bytes, size, C, what, sw, sh);
  const double fx = double(sw) / hdr.width, fy = double(sh) / hdr.height;
  win.x0 *= fx;
  win.width *= fx;
  win.y0 *= fy;
  win.height *= fy;
  resample_window(img.pixels.data(), PixelLayout::hwc(sh, sw, C), win, H, W, out);
}

void decode_batch(const EncodedImages& in, const std::vector<int64_t>& indices, const DatasetInfo& info,
                  bool resized_crop, uint64_t aug_seed, uint8_t* out, int threads) {
  const int64_t n = int64_t(indices.size());
  HT_CHECK(in.samples() == n, "decode_batch: ", in.samples(), " encoded samples for ", n, " indices");
  const int C = info.channels, H = info.height, W = info.width;
  const int64_t sb = info.sample_bytes();
  for_each_sample(n, threads, [&](int64_t i) {
    const int64_t begin = in.offsets[size_t(i)], end = in.offsets[size_t(i) + 1];
    decode_sample(in.bytes.data() + begin, size_t(end - begin), C, H, W, resized_crop, aug_seed, indices[size_t(i)],
                  info.path + ": sample " + std::to_string(indices[size_t(i)]), out + i * sb);
  });
}

}  // namespace hetrain::data
