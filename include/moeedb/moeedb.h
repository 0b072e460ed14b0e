/* moeedb C API: embed texts with an MoE model (MoEE: hidden state + routing
 * weights) and store and search them in collections, from C or any language
 * with a C FFI. Opaque handles, status codes; no exception crosses this
 * boundary. Every function that fails returns a non-zero status and sets a
 * message readable with moeedb_last_error() on the same thread.
 *
 * A moeedb_db is safe to use from several threads at once. */
#ifndef MOEEDB_H_
#define MOEEDB_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOEEDB_API __attribute__((visibility("default")))

typedef enum {
  MOEEDB_OK = 0,
  MOEEDB_INVALID_ARGUMENT = 1,
  MOEEDB_NOT_FOUND = 2,
  MOEEDB_CORRUPTION = 3,
  MOEEDB_NOT_SUPPORTED = 4,
  MOEEDB_IO_ERROR = 5,
  MOEEDB_INTERNAL = 6,
  MOEEDB_RESOURCE_EXHAUSTED = 7,
  MOEEDB_UNAVAILABLE = 8,     /* nothing was written: retry later */
  MOEEDB_OUTCOME_UNKNOWN = 9  /* a write's commit answer was lost: it may be stored */
} moeedb_status;

typedef struct moeedb_db moeedb_db;
typedef struct moeedb_hits moeedb_hits;

/* The message of the last failure on this thread ("" if none). Valid until
 * the next moeedb call on this thread. */
MOEEDB_API const char* moeedb_last_error(void);

/* Opens (creating if needed) the database at db_path, embedding with the
 * model folder model_dir (a HuggingFace folder or a moeedb model) with learned
 * routing and the folder's own prompt and poolings (`moeedb model info`).
 * threads <= 0: all cores. On success *out is a handle to moeedb_close. */
MOEEDB_API moeedb_status moeedb_open(const char* db_path, const char* model_dir, int threads, moeedb_db** out);
MOEEDB_API void moeedb_close(moeedb_db* db);

MOEEDB_API size_t moeedb_dim_hs(const moeedb_db* db);
MOEEDB_API size_t moeedb_dim_rw(const moeedb_db* db);

/* Embeds one text: writes dim_hs floats to hs and dim_rw floats to rw (raw
 * vectors, as `moeedb embed` prints them); *tokens (if not NULL) receives the
 * number of tokens the model ran. */
MOEEDB_API moeedb_status moeedb_embed(moeedb_db* db, const char* text, float* hs, float* rw, int* tokens);

/* Inserts or replaces n documents in `collection` (created on first use, flat
 * indexes), as one atomic write, durable when this returns. metadata_json may
 * be NULL, or hold NULL entries; each non-NULL entry must be a JSON object. */
MOEEDB_API moeedb_status moeedb_upsert(moeedb_db* db, const char* collection, size_t n, const char* const* ids,
                            const char* const* texts, const char* const* metadata_json);

/* Deletes documents by id (durable when this returns); *deleted (if not
 * NULL) receives how many existed. */
MOEEDB_API moeedb_status moeedb_delete(moeedb_db* db, const char* collection, size_t n, const char* const* ids, size_t* deleted);

/* Search. mode: "fused" (score = cos_HS + alpha * cos_RW; NULL means fused),
 * "hs", "rw", "lexical" (BM25 over the texts; no embedding) or "hybrid" (the
 * three signals fused with the defaults: rrf, lexical weight 16);
 * filter_json: a metadata filter object or NULL. On success *out holds the
 * hits, best first; free it with moeedb_hits_free. */
MOEEDB_API moeedb_status moeedb_search(moeedb_db* db, const char* collection, const char* query, size_t k, float alpha,
                            const char* mode, const char* filter_json, moeedb_hits** out);

/* Hybrid search with its weights: HS weight 1, RW weight alpha, lexical
 * weight beta (both >= 0), fused by fusion: "rrf" (reciprocal ranks, k = 60;
 * NULL means rrf) or "weighted" (min-max normalised scores). */
MOEEDB_API moeedb_status moeedb_search_hybrid(moeedb_db* db, const char* collection, const char* query, size_t k,
                                   float alpha, float beta, const char* fusion, const char* filter_json,
                                   moeedb_hits** out);

/* Search with a spec in JSON: the collections API's search body,
 * {"query", "k", "mode", "alpha", "beta", "w_hs", "fusion", "norm", "rrf_k",
 * "filter", "exact", "oversample"} (docs/server.md; absent fields take their defaults).
 * Every search setting is reachable this way. */
MOEEDB_API moeedb_status moeedb_search_json(moeedb_db* db, const char* collection, const char* spec_json,
                                            moeedb_hits** out);

/* Creates `collection`, embedded with the served model, with the settings of
 * a JSON spec: {"index_hs", "index_rw", "codes", "pq_dims", "oversample",
 * "on_disk", "fp16_rows", "sq8", "alpha", "lexical", "language", "bm25_k1",
 * "bm25_b"} (or the collections API's nested "index" and "lexical" forms). MOEEDB_INVALID_ARGUMENT when it exists already. */
MOEEDB_API moeedb_status moeedb_create_collection_json(moeedb_db* db, const char* collection, const char* spec_json);

/* The spec a JSON text reads as, written back as JSON (the fields that are
 * set), or the error any front end gives for it. kind: "search" or
 * "collection". On success *out holds a string to free with moeedb_free. */
MOEEDB_API moeedb_status moeedb_spec_json(const char* kind, const char* spec_json, char** out);
MOEEDB_API void moeedb_free(void* p);

MOEEDB_API size_t moeedb_hits_count(const moeedb_hits* hits);
/* Accessors for hit i < count; strings live as long as `hits`. */
MOEEDB_API const char* moeedb_hit_id(const moeedb_hits* hits, size_t i);
MOEEDB_API const char* moeedb_hit_text(const moeedb_hits* hits, size_t i);
MOEEDB_API const char* moeedb_hit_metadata(const moeedb_hits* hits, size_t i);
MOEEDB_API float moeedb_hit_score(const moeedb_hits* hits, size_t i);
MOEEDB_API float moeedb_hit_score_hs(const moeedb_hits* hits, size_t i);
MOEEDB_API float moeedb_hit_score_rw(const moeedb_hits* hits, size_t i);
/* The hit's BM25 score (0 when the collection has no lexical index). */
MOEEDB_API float moeedb_hit_score_lex(const moeedb_hits* hits, size_t i);
MOEEDB_API void moeedb_hits_free(moeedb_hits* hits);

#ifdef __cplusplus
}
#endif

#endif /* MOEEDB_H_ */
