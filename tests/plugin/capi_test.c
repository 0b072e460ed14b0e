/* The C API from C: open a database with a model, embed, upsert, search,
 * delete, and the error paths. Usage: capi_test MODEL_DIR DB_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moeedb/moeedb.h"

static int passed = 0, failed = 0;
#define CHECK(cond)                                                    \
  do {                                                                 \
    if (cond) {                                                        \
      ++passed;                                                        \
    } else {                                                           \
      ++failed;                                                        \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, moeedb_last_error()); \
    }                                                                  \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: capi_test MODEL_DIR DB_DIR\n");
    return 2;
  }
  moeedb_db* db = NULL;
  CHECK(moeedb_open(argv[2], "/nonexistent/model", 1, &db) == MOEEDB_NOT_FOUND);
  CHECK(db == NULL && strlen(moeedb_last_error()) > 0);
  CHECK(moeedb_open(argv[2], argv[1], 1, &db) == MOEEDB_OK);
  if (db == NULL) return 1;

  const size_t dh = moeedb_dim_hs(db), dr = moeedb_dim_rw(db);
  CHECK(dh > 0 && dr > 0);
  float* hs = calloc(dh, sizeof(float));
  float* rw = calloc(dr, sizeof(float));
  int tokens = 0;
  CHECK(moeedb_embed(db, "A man is playing a flute.", hs, rw, &tokens) == MOEEDB_OK);
  CHECK(tokens > 5);
  double norm = 0;
  for (size_t i = 0; i < dh; ++i) norm += hs[i] * hs[i];
  CHECK(isfinite(norm) && norm > 0);
  CHECK(moeedb_embed(db, "", hs, rw, NULL) == MOEEDB_INVALID_ARGUMENT);
  CHECK(moeedb_embed(db, "bad \xff utf8", hs, rw, NULL) == MOEEDB_INVALID_ARGUMENT);

  const char* ids[] = {"d1", "d2", "d3"};
  const char* texts[] = {"The stock market fell sharply.", "A woman is slicing an onion.", "Two dogs run in the snow."};
  const char* meta[] = {"{\"n\": 1}", NULL, "{\"n\": 3}"};
  CHECK(moeedb_upsert(db, "c", 3, ids, texts, meta) == MOEEDB_OK);
  const char* bad_meta[] = {"[1]"};
  const char* bad_id[] = {"d9"};
  CHECK(moeedb_upsert(db, "c", 1, bad_id, texts, bad_meta) == MOEEDB_INVALID_ARGUMENT);

  moeedb_hits* hits = NULL;
  CHECK(moeedb_search(db, "c", "A woman is slicing an onion.", 10, 0.5f, NULL, NULL, &hits) == MOEEDB_OK);
  CHECK(moeedb_hits_count(hits) == 3); /* the bad upsert stored nothing */
  CHECK(strcmp(moeedb_hit_id(hits, 0), "d2") == 0);
  CHECK(fabsf(moeedb_hit_score(hits, 0) - (moeedb_hit_score_hs(hits, 0) + 0.5f * moeedb_hit_score_rw(hits, 0))) < 1e-5f);
  CHECK(strcmp(moeedb_hit_text(hits, 0), texts[1]) == 0);
  moeedb_hits_free(hits);

  CHECK(moeedb_search(db, "c", "x", 10, 1.0f, "fused", "{\"n\": {\"$gte\": 2}}", &hits) == MOEEDB_OK);
  CHECK(moeedb_hits_count(hits) == 1 && strcmp(moeedb_hit_id(hits, 0), "d3") == 0);
  moeedb_hits_free(hits);
  CHECK(moeedb_search(db, "c", "x", 10, 1.0f, "sideways", NULL, &hits) == MOEEDB_INVALID_ARGUMENT);
  /* Lexical (BM25) and hybrid search. */
  CHECK(moeedb_search(db, "c", "onion slicing", 10, 1.0f, "lexical", NULL, &hits) == MOEEDB_OK);
  CHECK(moeedb_hits_count(hits) == 1 && strcmp(moeedb_hit_id(hits, 0), "d2") == 0);
  CHECK(moeedb_hit_score_lex(hits, 0) > 0 && moeedb_hit_score(hits, 0) == moeedb_hit_score_lex(hits, 0));
  moeedb_hits_free(hits);
  CHECK(moeedb_search_hybrid(db, "c", "onion slicing", 10, 0.5f, 2.0f, "rrf", NULL, &hits) == MOEEDB_OK);
  CHECK(moeedb_hits_count(hits) == 3 && strcmp(moeedb_hit_id(hits, 0), "d2") == 0);
  moeedb_hits_free(hits);
  CHECK(moeedb_search_hybrid(db, "c", "onion", 10, 0.5f, -1.0f, NULL, NULL, &hits) == MOEEDB_INVALID_ARGUMENT);
  CHECK(moeedb_search_hybrid(db, "c", "onion", 10, 0.5f, 1.0f, "borda", NULL, &hits) == MOEEDB_INVALID_ARGUMENT);
  CHECK(moeedb_search(db, "nope", "x", 10, 1.0f, NULL, NULL, &hits) == MOEEDB_NOT_FOUND);
  /* Every search setting through a JSON spec: the same hits as the hybrid call above. */
  CHECK(moeedb_search_json(db, "c", "{\"query\": \"onion slicing\", \"mode\": \"hybrid\", \"alpha\": 0.5, "
                                    "\"beta\": 2, \"fusion\": \"rrf\", \"rrf_k\": 60, \"k\": 2}", &hits) == MOEEDB_OK);
  CHECK(moeedb_hits_count(hits) == 2 && strcmp(moeedb_hit_id(hits, 0), "d2") == 0);
  moeedb_hits_free(hits);
  CHECK(moeedb_search_json(db, "c", "{\"query\": \"x\", \"k\": 0}", &hits) == MOEEDB_INVALID_ARGUMENT);
  CHECK(strstr(moeedb_last_error(), "'k'") != NULL);
  CHECK(moeedb_search_json(db, "c", "not json", &hits) == MOEEDB_INVALID_ARGUMENT);
  /* A collection from a JSON spec: lexical off, so lexical search is refused by name. */
  CHECK(moeedb_create_collection_json(db, "plain", "{\"lexical\": false, \"alpha\": 0.5}") == MOEEDB_OK);
  CHECK(moeedb_create_collection_json(db, "plain", "{}") == MOEEDB_INVALID_ARGUMENT);
  CHECK(moeedb_create_collection_json(db, "odd", "{\"index_hs\": \"lsh\"}") == MOEEDB_INVALID_ARGUMENT);
  CHECK(moeedb_upsert(db, "plain", 3, ids, texts, meta) == MOEEDB_OK);
  CHECK(moeedb_search(db, "plain", "onion", 10, 1.0f, "lexical", NULL, &hits) == MOEEDB_INVALID_ARGUMENT);
  CHECK(strstr(moeedb_last_error(), "no lexical index") != NULL);

  size_t deleted = 0;
  CHECK(moeedb_delete(db, "c", 1, &ids[1], &deleted) == MOEEDB_OK && deleted == 1);
  CHECK(moeedb_search(db, "c", "A woman is slicing an onion.", 10, 1.0f, NULL, NULL, &hits) == MOEEDB_OK);
  CHECK(moeedb_hits_count(hits) == 2);
  for (size_t i = 0; i < moeedb_hits_count(hits); ++i) CHECK(strcmp(moeedb_hit_id(hits, i), "d2") != 0);
  moeedb_hits_free(hits);
  CHECK(moeedb_upsert(NULL, "c", 0, NULL, NULL, NULL) == MOEEDB_INVALID_ARGUMENT);
  moeedb_close(db);

  /* Reopen: the writes are there. */
  CHECK(moeedb_open(argv[2], argv[1], 1, &db) == MOEEDB_OK);
  CHECK(moeedb_search(db, "c", "Two dogs run in the snow.", 1, 1.0f, NULL, NULL, &hits) == MOEEDB_OK);
  CHECK(moeedb_hits_count(hits) == 1 && strcmp(moeedb_hit_id(hits, 0), "d3") == 0);
  moeedb_hits_free(hits);
  moeedb_close(db);
  free(hs);
  free(rw);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
