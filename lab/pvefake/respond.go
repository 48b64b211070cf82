package pvefake

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// apiError is an error answered the way PVE's API daemon answers it: the HTTP reason phrase is
// the first line of the message, the JSON body is {"data":null,"message":"…\n"} plus
// "errors" for parameter verification failures.
type apiError struct {
	Code    int
	Message string
	Errors  map[string]string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

// errf is a plain `die "…\n"` in PVE's API code: 500 with the message.
func errf(format string, args ...any) *apiError {
	return &apiError{Code: http.StatusInternalServerError, Message: fmt.Sprintf(format, args...)}
}

// notExist is the error of a missing VM configuration, as PVE's load_config words it.
func notExist(node string, vmid int) *apiError {
	return errf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", node, vmid)
}

// paramErr is PVE's raise_param_exc: 400 "Parameter verification failed." with per-field errors.
func paramErr(errs map[string]string) *apiError {
	return &apiError{Code: http.StatusBadRequest, Message: "Parameter verification failed.", Errors: errs}
}

func paramErr1(field, msg string) *apiError { return paramErr(map[string]string{field: msg}) }

// writeData answers 200 {"data": data}.
func writeData(w http.ResponseWriter, data any) {
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		writeError(w, errf("internal error encoding the response: %v", err))
		return
	}

	h := w.Header()
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Cache-Control", "max-age=0")
	h.Set("Pragma", "no-cache")
	h.Set("Server", "pve-api-daemon/3.0")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// writeError answers an error with PVE's reason phrase. Go's server always writes the standard
// reason phrase, so the connection is hijacked and the response written by hand; PVE closes the
// connection after every error too (keep_alive = 0 for codes >= 400).
func writeError(w http.ResponseWriter, e *apiError) {
	msg := strings.TrimRight(e.Message, "\n")
	reason, _, _ := strings.Cut(msg, "\n")
	reason = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}

		return r
	}, reason)

	if reason == "" {
		reason = http.StatusText(e.Code)
	}

	payload := map[string]any{"data": nil, "message": msg + "\n"}
	if len(e.Errors) > 0 {
		errs := make(map[string]string, len(e.Errors))
		for k, v := range e.Errors {
			errs[k] = strings.TrimRight(v, "\n") + "\n"
		}

		payload["errors"] = errs
	}

	body, _ := json.Marshal(payload)

	hj, ok := w.(http.Hijacker)
	if !ok {
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		w.WriteHeader(e.Code)
		_, _ = w.Write(body)

		return
	}

	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer func() { _ = conn.Close() }()

	writeRaw(buf, e.Code, reason, body)
}

func writeRaw(buf *bufio.ReadWriter, code int, reason string, body []byte) {
	date := time.Now().UTC().Format(http.TimeFormat)
	headers := map[string]string{
		"Cache-Control":  "max-age=0",
		"Connection":     "close",
		"Content-Length": fmt.Sprint(len(body)),
		"Content-Type":   "application/json;charset=UTF-8",
		"Date":           date,
		"Expires":        date,
		"Pragma":         "no-cache",
		"Server":         "pve-api-daemon/3.0",
	}

	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}

	sort.Strings(keys)

	_, _ = fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", code, reason)

	for _, k := range keys {
		_, _ = fmt.Fprintf(buf, "%s: %s\r\n", k, headers[k])
	}

	_, _ = buf.WriteString("\r\n")
	_, _ = buf.Write(body)
	_ = buf.Flush()
}
