// Package dashboard serves the web dashboard, the single-page app built
// from dashboard/src into dashboard/dist (make dashboard) and embedded here,
// so that `go build` alone gives a coordinator with a working dashboard.
//
// It serves files only: the data comes from the coordinator's REST API
// (/v1/...), which the page calls with the user's token. It is not an API
// server and holds no state.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// asset is one embedded file, read once: its ETag is its content hash.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// contentTypes are set explicitly rather than from the system's MIME table
// (mime.TypeByExtension reads /etc/mime.types), so every machine answers
// the same.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".json": "application/json",
}

// Handler serves the dashboard: a file of dist by its path, index.html for
// every other path (the app routes in the browser: /jobs/x is a page, not a
// file), and 404 for /v1/ paths, which are the API's and must never answer
// with HTML. Every answer carries no-cache with an ETag, so a browser
// revalidates (a 304 when unchanged) and never runs a stale app after an
// upgrade.
func Handler() http.Handler {
	assets, err := load(dist)
	if err != nil {
		// dist is compiled in: a failure here is a broken build.
		panic(err)
	}
	return handler(assets)
}

func load(fsys fs.FS) (map[string]*asset, error) {
	sub, err := fs.Sub(fsys, "dist")
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	assets := map[string]*asset{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		assets["/"+p] = &asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: embedded assets: %w", err)
	}
	if assets["/index.html"] == nil {
		return nil, fmt.Errorf("dashboard: embedded assets have no index.html (run make dashboard)")
	}
	return assets, nil
}

func handler(assets map[string]*asset) http.Handler {
	index := assets["/index.html"]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean("/" + r.URL.Path)
		if p == "/v1" || strings.HasPrefix(p, "/v1/") {
			http.NotFound(w, r)
			return
		}
		a := assets[p]
		if a == nil {
			a = index
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		// Everything is bundled: the page loads nothing from elsewhere and
		// runs no inline script, and no other site may frame it.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		// ServeContent answers If-None-Match with 304 from the ETag.
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}
