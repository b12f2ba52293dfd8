#!/bin/sh
# Makes a test CA and leaves (good and flawed) in the current folder with the openssl CLI.
set -e
q() { "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; "$@"; exit 1; }; }
q openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 -subj "/CN=ATSProxy E2E Test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
mkdir -p db; : > db/index.txt; echo 1000 > db/serial
cat > ca.cnf <<CNF
[ca]
default_ca = test
[test]
dir = .
database = db/index.txt
serial = db/serial
new_certs_dir = db
certificate = ca.pem
private_key = ca.key
policy = any
email_in_dn = no
copy_extensions = none
unique_subject = no
[any]
commonName = supplied
CNF
# sign NAME CN KEYBITS DIGEST [STARTDATE ENDDATE]: a leaf with the extensions in NAME.ext, 30 days without dates
sign() {
  name=$1; cn=$2; bits=$3; md=$4
  q openssl req -newkey rsa:$bits -nodes -keyout $name.key -out $name.csr -subj "/CN=$cn"
  if [ -n "$5" ]; then
    q openssl ca -batch -config ca.cnf -md $md -startdate $5 -enddate $6 -extfile $name.ext -in $name.csr -out $name.pem -notext
  else
    q openssl ca -batch -config ca.cnf -md $md -days 30 -extfile $name.ext -in $name.csr -out $name.pem -notext
  fi
}
usage="basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
# leaf NAME SAN-HOST KEYBITS DIGEST [STARTDATE ENDDATE]
leaf() {
  printf "${usage}extendedKeyUsage=serverAuth\nsubjectAltName=DNS:%s\n" "$2" > $1.ext
  sign "$@"
}
leaf good good.test 2048 sha256
leaf expired expired.test 2048 sha256 20200101000000Z 20200201000000Z
leaf wronghost other.test 2048 sha256
leaf sha1 sha1.test 2048 sha1
leaf rsa1024 rsa1024.test 1024 sha256
leaf tls10 tls10.test 2048 sha256
leaf passthrough passthrough.test 2048 sha256
leaf media media-server.example.com 2048 sha256
# 1000 days: over the 825 days iOS allows under a user-installed root.
leaf longlived longlived.test 2048 sha256 $(date -u -d '-1 day' +%Y%m%d%H%M%SZ) $(date -u -d '+999 days' +%Y%m%d%H%M%SZ)
# Mirror mode's date flaws: valid only from 10 days ahead, and 900 days long (over 398 and 825).
leaf notyet notyet.test 2048 sha256 $(date -u -d '+10 days' +%Y%m%d%H%M%SZ) $(date -u -d '+40 days' +%Y%m%d%H%M%SZ)
leaf long900 long900.test 2048 sha256 $(date -u -d '-1 day' +%Y%m%d%H%M%SZ) $(date -u -d '+899 days' +%Y%m%d%H%M%SZ)
# A wildcard leaf that also names one name two levels down, for the --passthrough/--map pattern tests.
printf "${usage}extendedKeyUsage=serverAuth\nsubjectAltName=DNS:*.wild.test,DNS:deep.api.wild.test\n" > wild.ext
sign wild '*.wild.test' 2048 sha256
# No extendedKeyUsage at all.
printf "${usage}subjectAltName=DNS:noeku.test\n" > noeku.ext
sign noeku noeku.test 2048 sha256
q openssl req -x509 -newkey rsa:2048 -nodes -keyout selfsigned.key -out selfsigned.pem -days 30 -subj "/CN=selfsigned.test" \
  -addext "subjectAltName=DNS:selfsigned.test" -addext "extendedKeyUsage=serverAuth"
echo ok
