// Package storage is Eddy's blob store: one small interface, [Store], for
// putting, getting, listing and deleting immutable-by-convention objects
// under slash-separated keys, with two implementations chosen by URL in
// [Open]:
//
//   - file:///abs/dir (or a plain path): a local directory, the embedded
//     default. Each Put writes a temporary file in the target directory,
//     fsyncs it and renames it into place.
//   - s3://bucket/optional/prefix: any S3-compatible server through
//     minio-go, addressed path-style unless the endpoint is AWS or GCS.
//
// Checkpoints, savepoints and the module registry keep their files here;
// [PutContent] and [GetContent] store content-addressed blobs (modules live
// at tenants/<tenant>/modules/<sha256>) and detect corruption on read.
//
// Usage:
//
//	cfg, err := storage.ConfigFromEnv() // EDDY_S3_ACCESS_KEY, …
//	st, err := storage.Open(ctx, "s3://eddy/checkpoints", cfg)
//	defer st.Close()
//	err = st.Put(ctx, "job-1/chk-42/MANIFEST", bytes.NewReader(b), int64(len(b)))
//
// Errors a caller may act on match, with [errors.Is], one of [ErrNotFound],
// [ErrInvalidKey], [ErrUnavailable] (retry later), [ErrCorrupt] or
// [ErrClosed]; each reads as one line starting with "storage:".
//
// What it is not: a file system or a database. There are no directories
// (a prefix is just a string prefix), no appends, no partial writes, no
// renames, no transactions across keys and no locking; concurrent Puts of
// one key leave one of them whole ("last writer wins"). Layout decisions
// (which keys a checkpoint or a module uses) belong to the callers, and
// the S3 server the tests run is started by package s3test, not here.
package storage
