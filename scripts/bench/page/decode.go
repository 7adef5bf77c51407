package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
)

// readJSON decodes the results file at path into v and checks that every key
// v's type names is present and not null, unless its field is tagged
// `bench:"optional"`. The bench scripts built their JSON by hand, where a
// missing figure used to become a zero on the page (issue 25); here it is
// an error that names the file and the key.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return decodeStrict(path, data, v)
}

// readJSONL decodes one value per non-empty line of path, each checked as
// readJSON checks a file.
func readJSONL[T any](path string) ([]T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var v T
		if err := decodeStrict(fmt.Sprintf("%s:%d", path, n), line, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// decodeStrict is readJSON on bytes; name is what errors call the input.
func decodeStrict(name string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := checkPresent(reflect.TypeOf(v).Elem(), tree, ""); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// checkPresent walks typ beside the decoded JSON value and returns an error
// for the first key typ requires that the JSON lacks or holds as null.
func checkPresent(typ reflect.Type, val any, at string) error {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ.Kind() {
	case reflect.Struct:
		obj, ok := val.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not an object", orTop(at))
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if key == "" || key == "-" {
				continue
			}
			path := key
			if at != "" {
				path = at + "." + key
			}
			sub, present := obj[key]
			if !present || sub == nil {
				if f.Tag.Get("bench") == "optional" {
					continue
				}
				return fmt.Errorf("%s: missing", path)
			}
			if err := checkPresent(f.Type, sub, path); err != nil {
				return err
			}
		}
	case reflect.Slice:
		arr, ok := val.([]any)
		if !ok {
			return fmt.Errorf("%s: not an array", orTop(at))
		}
		for i, el := range arr {
			if el == nil {
				return fmt.Errorf("%s[%d]: missing", at, i)
			}
			if err := checkPresent(typ.Elem(), el, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := val.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not an object", orTop(at))
		}
		for k, el := range obj {
			if el == nil {
				return fmt.Errorf("%s.%s: missing", at, k)
			}
			if err := checkPresent(typ.Elem(), el, at+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func orTop(at string) string {
	if at == "" {
		return "top level"
	}
	return at
}
