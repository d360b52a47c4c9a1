// data/image.hpp — decoding JPEG/PNG files, the resize + centre crop of the folder packer and the
// letterbox of the detection packers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetrain::data {

struct Image {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // interleaved HWC, as decoders produce it
};

// A file name as an error message shows it: as it is, or quoted() when it holds control characters (a NUL,
// a newline), so the message stays one whole line.
std::string shown_name(const std::string& path);
// The bytes of a regular file (a FIFO, a device or a folder is refused, never waited on); throws naming it.
std::vector<uint8_t> read_whole_file(const std::string& path);

// The most pixels (width x height) an input image may have: Pillow's limit (MAX_IMAGE_PIXELS, 89,478,485,
// about 9459 x 9459). Checked on the header, before anything of the image's size is allocated.
constexpr int64_t kDefaultMaxPixels = 89478485;
// What a file's first bytes and header say: JPEG or PNG, and the image's size (libjpeg-turbo's and libpng's
// header reads; nothing is decoded). Throws naming the file when it is neither or the header is corrupt.
struct ImageInfo {
  enum Kind { kJpeg, kPng } kind = kJpeg;
  int width = 0, height = 0;
};
ImageInfo read_image_info(const std::vector<uint8_t>& bytes, const std::string& path);
// Throws naming the file when info's width x height exceeds max_pixels (0 = no limit).
void check_pixels(const ImageInfo& info, int64_t max_pixels, const std::string& path);

// channels 1 = grey, 3 = RGB. Throws hetrain::Error naming the file on corrupt or truncated input
// (libjpeg-turbo warnings such as "premature end of data" count as errors).
Image decode_jpeg(const std::string& path, int channels);
Image decode_png(const std::string& path, int channels);
// A PNG file in memory; `path` names it in errors.
Image decode_png_bytes(const std::vector<uint8_t>& bytes, int channels, const std::string& path);
// JPEG or PNG by the file's first bytes (whatever its name says), refused before decoding when it has more
// than max_pixels pixels (0 = no limit).
Image decode_image(const std::string& path, int channels, int64_t max_pixels = kDefaultMaxPixels);

// JPEG in memory (the packer's and the reader's; `what` names the input in errors, e.g. "<file>: sample 7").
struct JpegHeader {
  int width = 0, height = 0;
  int colorspace = 0;  // TJCS_*: TJCS_YCbCr or TJCS_GRAY decode to RGB and grey alike
};
JpegHeader read_jpeg_header(const uint8_t* data, size_t size, const std::string& what);
// Decodes to `channels` (1 grey, 3 RGB), HWC. scaled_width/height > 0: libjpeg-turbo's inverse DCT scales by
// the factor k/8 that gives exactly that size (jpeg_scaled_size), cheaper than decoding in full.
Image decode_jpeg_bytes(const uint8_t* data, size_t size, int channels, const std::string& what,
                        int scaled_width = 0, int scaled_height = 0);
// The smallest scale k/8 ≤ 1 at which a width × height window of the image still covers min_width ×
// min_height pixels, and the image's size at that scale.
void jpeg_scaled_size(int width, int height, double window_width, double window_height, int min_width,
                      int min_height, int* scaled_width, int* scaled_height);
// One stored sample of a JPEG dataset decoded to C × H × W (CHW) through draw_resized_crop(aug_seed, index)
// or, when not resized_crop, centre_window (see decode_batch in hetrain/data.hpp).
void decode_sample(const uint8_t* bytes, size_t size, int C, int H, int W, bool resized_crop, uint64_t aug_seed,
                   int64_t index, const std::string& what, uint8_t* out);
// Baseline JPEG at `quality` (1-100): 4:2:0 chroma for RGB, as photo JPEGs are; grey stays grey.
std::vector<uint8_t> encode_jpeg(const Image& img, int quality);

// Shorter side → size (bilinear, pixel centres aligned), then the centre size×size crop, as CHW.
// An image already size×size is copied unchanged.
void resize_center_crop(const Image& in, int size, uint8_t* out_chw);

// Where letterbox() put the image: a point at pixel-edge coordinate (x, y) of the input lands at
// (x·scale_x + pad_x, y·scale_y + pad_y) of the output.
struct Placement {
  double scale_x = 1, scale_y = 1;
  int pad_x = 0, pad_y = 0;
};
// Where letterbox() puts a width × height image on a size × size canvas (a pure function of the sizes:
// hetrain eval --save-json maps detections back with it).
Placement letterbox_placement(int width, int height, int size);
// The whole image scaled by size / max(H, W) (bilinear, pixel centres aligned; the scaled sides rounded to
// whole pixels), centred on a size×size canvas of `fill`, as CHW. Boxes stay whole: nothing is cropped.
Placement letterbox(const Image& in, int size, uint8_t fill, uint8_t* out_chw);
// Bilinear resize of an HWC image to out_h × out_w (pixel centres aligned), HWC.
Image resize_bilinear(const Image& in, int out_h, int out_w);

}  // namespace hetrain::data
