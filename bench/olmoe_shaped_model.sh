# Sourced by the benchmarks on the OLMoE-shaped random checkpoint
# (bench/configs/olmoe-shaped-8l.json: hidden 1024, 8 layers, 16 heads, 64
# experts x 512, top-8, vocabulary 50304; 3.8 GB in f32): sets MODEL to its
# folder and writes it there first if it is not there yet.
MODEL=build/bench-embed/olmoe-shaped-8l
mkdir -p build/bench-embed
if [ ! -f "$MODEL/model.safetensors" ]; then
  ./build/moeedb model init --config bench/configs/olmoe-shaped-8l.json \
    --tokenizer tests/data/tokenizers/olmoe/tokenizer.json --seed 0 --out "$MODEL"
fi
