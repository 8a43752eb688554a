// Package stream reads OpenAI-style streaming responses on the client side:
// a lean server-sent-events reader (Reader) and an allocation-free scanner
// for the JSON chunks a completions or chat-completions stream carries
// (Parser). The benchmark client drives a thousand streams from one process
// with them, so neither allocates per event in steady state.
package stream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Reader splits a text/event-stream body into events and returns the data of
// each. Comment lines (":ping") and fields other than "data" are skipped;
// several data lines in one event are joined with "\n" as the SSE spec says.
// A Reader is not safe for concurrent use; Reset lets one be reused for
// another body.
type Reader struct {
	br      *bufio.Reader
	data    []byte // data of the event being assembled
	long    []byte // scratch for lines longer than the bufio buffer
	hasData bool   // data holds at least one data line of the current event
}

// NewReader returns a Reader over src with a read buffer of size bytes
// (4096 when size <= 0).
func NewReader(src io.Reader, size int) *Reader {
	if size <= 0 {
		size = 4096
	}
	return &Reader{br: bufio.NewReaderSize(src, size)}
}

// Reset makes r read from src, keeping its buffers.
func (r *Reader) Reset(src io.Reader) {
	r.br.Reset(src)
	r.data = r.data[:0]
	r.hasData = false
}

// Next returns the data of the next event that has any. The slice is valid
// until the next call to Next or Reset. At a clean end of input it returns
// io.EOF; an event whose blank terminating line never arrived is still
// returned first (vLLM's client accepts such a trailing event too). Read
// errors, io.ErrUnexpectedEOF from a truncated body among them, are returned
// as they are.
func (r *Reader) Next() ([]byte, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && r.hasData {
				r.hasData = false
				return r.data, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if r.hasData {
				r.hasData = false
				return r.data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if string(field) != "data" {
			continue
		}
		if r.hasData {
			r.data = append(r.data, '\n')
		} else {
			r.data = r.data[:0]
			r.hasData = true
		}
		r.data = append(r.data, value...)
	}
}

// readLine returns the next line without its "\n" or "\r\n". A last line
// without a newline is returned before io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	return line, nil
}
